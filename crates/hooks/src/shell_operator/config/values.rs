//! The scalar values of shell-operator's formats that serde's own types read too
//! strictly or name too vaguely: booleans written as strings, integers written as
//! strings or as whole floats, Go durations, label values, and `nameSelector` in both
//! of its spellings.

use super::read::found_text;
use crate::shell_operator::duration::parse_go_duration;
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Unexpected, Visitor};
use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

/// `true` or `false`. The strings `"true"` and `"false"` count too: quoted booleans
/// are common in hand-written YAML and their meaning is clear.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Flag(pub bool);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FlagVisitor;

        impl Visitor<'_> for FlagVisitor {
            type Value = Flag;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("true or false")
            }

            fn visit_bool<E: de::Error>(self, value: bool) -> Result<Flag, E> {
                Ok(Flag(value))
            }

            fn visit_str<E: de::Error>(self, value: &str) -> Result<Flag, E> {
                match value {
                    "true" => Ok(Flag(true)),
                    "false" => Ok(Flag(false)),
                    _ => Err(E::invalid_value(Unexpected::Str(value), &self)),
                }
            }
        }

        deserializer.deserialize_any(FlagVisitor)
    }
}

/// An integer that fits `T`. A whole float (`10.0`) counts, as YAML and JSON readers
/// may produce one, and so does a numeric string: shell-operator reads
/// `executionBurst` as a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Integer<T>(pub T);

impl<'de, T: TryFrom<i64>> Deserialize<'de> for Integer<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct IntegerVisitor<T>(PhantomData<T>);

        impl<T: TryFrom<i64>> Visitor<'_> for IntegerVisitor<T> {
            type Value = Integer<T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer")
            }

            fn visit_i64<E: de::Error>(self, value: i64) -> Result<Self::Value, E> {
                T::try_from(value)
                    .map(Integer)
                    .map_err(|_| E::custom(format!("{value} is out of range")))
            }

            fn visit_u64<E: de::Error>(self, value: u64) -> Result<Self::Value, E> {
                match i64::try_from(value) {
                    Ok(value) => self.visit_i64(value),
                    Err(_) => Err(E::custom(format!("{value} is out of range"))),
                }
            }

            fn visit_f64<E: de::Error>(self, value: f64) -> Result<Self::Value, E> {
                // Whole and well inside i64's range, so the cast is exact; beyond it
                // the cast would saturate, so refuse there.
                if value.fract() == 0.0 && value.abs() < 9.2e18 {
                    self.visit_i64(value as i64)
                } else {
                    Err(E::invalid_value(Unexpected::Float(value), &self))
                }
            }

            fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
                match value.trim().parse::<i64>() {
                    Ok(number) => self.visit_i64(number),
                    Err(_) => Err(E::invalid_value(Unexpected::Str(value), &self)),
                }
            }
        }

        deserializer.deserialize_any(IntegerVisitor(PhantomData))
    }
}

/// A Go duration string such as `3s` or `1h30m` (`time.ParseDuration`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct GoDuration(pub Duration);

impl GoDuration {
    /// In milliseconds, as the model keeps durations.
    pub(super) fn millis(self) -> u64 {
        u64::try_from(self.0.as_millis()).unwrap_or(u64::MAX)
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        parse_go_duration(text.trim())
            .map(GoDuration)
            .map_err(de::Error::custom)
    }
}

/// A label value: always a string in Kubernetes, while YAML reads `true` or `10`
/// unquoted as something else, a common slip that deserves its own explanation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LabelValue(pub String);

impl<'de> Deserialize<'de> for LabelValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LabelValueVisitor;

        fn unquoted<E: de::Error>(found: Unexpected<'_>) -> E {
            E::custom(format!(
                "label values are strings, found {} (quote it)",
                found_text(&found)
            ))
        }

        impl Visitor<'_> for LabelValueVisitor {
            type Value = LabelValue;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }

            fn visit_str<E: de::Error>(self, value: &str) -> Result<LabelValue, E> {
                Ok(LabelValue(value.to_owned()))
            }

            fn visit_bool<E: de::Error>(self, value: bool) -> Result<LabelValue, E> {
                Err(unquoted(Unexpected::Bool(value)))
            }

            fn visit_i64<E: de::Error>(self, value: i64) -> Result<LabelValue, E> {
                Err(unquoted(Unexpected::Signed(value)))
            }

            fn visit_u64<E: de::Error>(self, value: u64) -> Result<LabelValue, E> {
                Err(unquoted(Unexpected::Unsigned(value)))
            }

            fn visit_f64<E: de::Error>(self, value: f64) -> Result<LabelValue, E> {
                Err(unquoted(Unexpected::Float(value)))
            }
        }

        deserializer.deserialize_any(LabelValueVisitor)
    }
}

/// `nameSelector`: `{matchNames: [...]}` as the schema has it, or a bare list of
/// names, as shell-operator's own documentation writes `namespace.nameSelector`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NameSelector(pub Vec<String>);

/// The schema's spelling of a [`NameSelector`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct MatchNames {
    match_names: Vec<String>,
}

impl<'de> Deserialize<'de> for NameSelector {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NameSelectorVisitor;

        impl<'de> Visitor<'de> for NameSelectorVisitor {
            type Value = NameSelector;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping with matchNames")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NameSelector, A::Error> {
                let mut names = Vec::new();
                while let Some(name) = seq.next_element()? {
                    names.push(name);
                }
                Ok(NameSelector(names))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<NameSelector, A::Error> {
                let selector = MatchNames::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(NameSelector(selector.match_names))
            }
        }

        deserializer.deserialize_any(NameSelectorVisitor)
    }
}
