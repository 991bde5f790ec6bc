//! The JSON of a protobuf message as the API server writes it: [`ToJson`] for the
//! scalars, lists and maps prost makes, for the apimachinery types whose JSON is not
//! their message's shape (`Time`, `MicroTime`, `Quantity`, `IntOrString`, `FieldsV1`,
//! `RawExtension`), and [`messages!`] to write it for a message from its field list.
//!
//! Go's protobuf marshaller writes every field that is not a pointer, zero or not,
//! while its JSON leaves out the zero `omitempty` ones; so each message lists its
//! fields in up to three groups: those written whenever present (pointers, fields
//! without `omitempty`, structs), then the `omitempty` scalars left out when zero,
//! then the `json:",inline"` structs whose fields are the parent's.

use base64::Engine as _;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1::{FieldsV1, MicroTime, Time};
use k8s_pb::apimachinery::pkg::runtime::RawExtension;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A message or field as the API server's JSON writes it.
pub(super) trait ToJson {
    /// The JSON value, or `None` when the field is left out (unset, or an empty list
    /// or map, which the API server's JSON leaves out too).
    fn to_json(&self) -> Option<Value>;
}

impl ToJson for String {
    fn to_json(&self) -> Option<Value> {
        Some(Value::String(self.clone()))
    }
}

impl ToJson for bool {
    fn to_json(&self) -> Option<Value> {
        Some(Value::Bool(*self))
    }
}

impl ToJson for i32 {
    fn to_json(&self) -> Option<Value> {
        Some(Value::from(*self))
    }
}

impl ToJson for i64 {
    fn to_json(&self) -> Option<Value> {
        Some(Value::from(*self))
    }
}

/// `bytes` fields: base64, as Go's JSON writes a `[]byte`.
impl ToJson for Vec<u8> {
    fn to_json(&self) -> Option<Value> {
        Some(Value::String(
            base64::engine::general_purpose::STANDARD.encode(self),
        ))
    }
}

impl<T: ToJson> ToJson for Option<T> {
    fn to_json(&self) -> Option<Value> {
        self.as_ref().and_then(ToJson::to_json)
    }
}

impl<T: ToJson> ToJson for Vec<T> {
    fn to_json(&self) -> Option<Value> {
        if self.is_empty() {
            return None;
        }
        Some(Value::Array(
            self.iter()
                .map(|item| item.to_json().unwrap_or(Value::Null))
                .collect(),
        ))
    }
}

impl<T: ToJson> ToJson for BTreeMap<String, T> {
    fn to_json(&self) -> Option<Value> {
        if self.is_empty() {
            return None;
        }
        Some(Value::Object(
            self.iter()
                .map(|(key, item)| (key.clone(), item.to_json().unwrap_or(Value::Null)))
                .collect(),
        ))
    }
}

/// RFC 3339 in UTC to the second, as `metav1.Time` writes it (its protobuf form
/// drops the nanoseconds too); the zero time, which Go sends as an empty message, is
/// `null`.
impl ToJson for Time {
    fn to_json(&self) -> Option<Value> {
        if self.seconds.is_none() && self.nanos.is_none() {
            return Some(Value::Null);
        }
        Some(match timestamp(self.seconds.unwrap_or_default(), 0) {
            Some(time) => Value::String(time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
            None => Value::Null,
        })
    }
}

/// RFC 3339 in UTC with microseconds, as `metav1.MicroTime` writes it.
impl ToJson for MicroTime {
    fn to_json(&self) -> Option<Value> {
        if self.seconds.is_none() && self.nanos.is_none() {
            return Some(Value::Null);
        }
        let micros = self.nanos.unwrap_or_default() / 1000 * 1000;
        Some(match timestamp(self.seconds.unwrap_or_default(), micros) {
            Some(time) => Value::String(time.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()),
            None => Value::Null,
        })
    }
}

fn timestamp(seconds: i64, nanos: i32) -> Option<jiff::Timestamp> {
    jiff::Timestamp::new(seconds, nanos).ok()
}

/// A quantity's canonical text, which is what its message carries.
impl ToJson for Quantity {
    fn to_json(&self) -> Option<Value> {
        Some(Value::String(
            self.string.clone().unwrap_or_else(|| "0".to_owned()),
        ))
    }
}

/// An int-or-string is a bare number or a bare string (`type` 1 is the string).
impl ToJson for IntOrString {
    fn to_json(&self) -> Option<Value> {
        Some(if self.r#type == Some(1) {
            Value::String(self.str_val.clone().unwrap_or_default())
        } else {
            Value::from(self.int_val.unwrap_or_default())
        })
    }
}

/// Managed fields' set, which is JSON text inside the message.
impl ToJson for FieldsV1 {
    fn to_json(&self) -> Option<Value> {
        embedded_json(self.raw.as_deref())
    }
}

/// An embedded object, JSON text inside the message.
impl ToJson for RawExtension {
    fn to_json(&self) -> Option<Value> {
        embedded_json(self.raw.as_deref())
    }
}

fn embedded_json(raw: Option<&[u8]>) -> Option<Value> {
    let raw = raw.filter(|raw| !raw.is_empty())?;
    Some(serde_json::from_slice(raw).unwrap_or(Value::Null))
}

/// A field's JSON name from its Rust name when the two differ only by case
/// (`generate_name` is `generateName`); the others are written in the field lists.
pub(super) fn camel(field: &str) -> String {
    let field = field.trim_start_matches("r#");
    let mut name = String::with_capacity(field.len());
    let mut upper = false;
    for c in field.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            name.extend(c.to_uppercase());
            upper = false;
        } else {
            name.push(c);
        }
    }
    name
}

pub(super) fn set(object: &mut Map<String, Value>, name: impl Into<String>, value: Option<Value>) {
    if let Some(value) = value {
        object.insert(name.into(), value);
    }
}

/// A non-pointer `omitempty` scalar: Go's JSON leaves it out when it is zero.
pub(super) fn non_zero(value: Option<Value>) -> Option<Value> {
    value.filter(|value| match value {
        Value::String(text) => !text.is_empty(),
        Value::Bool(flag) => *flag,
        Value::Number(number) => number.as_f64() != Some(0.0),
        _ => true,
    })
}

/// An inline struct: its fields are the parent's.
pub(super) fn inline(object: &mut Map<String, Value>, value: Option<Value>) {
    if let Some(Value::Object(fields)) = value {
        object.extend(fields);
    }
}

/// `ToJson` for messages from their field lists: `Message { written, ...; omitted_when_zero,
/// ...; inline, ... }`, each field `name` or `name = "jsonName"` when the JSON name is
/// not the field's in camel case. The pattern names every field, so a message that
/// gains one in a new k8s-pb fails to compile here rather than losing it.
macro_rules! messages {
    (@name $field:ident) => {
        $crate::local::server::protobuf::json::camel(stringify!($field))
    };
    (@name $field:ident $name:literal) => {
        $name
    };
    ($($message:ident {
        $($field:ident $(= $name:literal)?),*
        $(; $($zero:ident $(= $zero_name:literal)?),*
            $(; $($inline:ident),*)?
        )?
    })*) => {$(
        impl $crate::local::server::protobuf::json::ToJson for $message {
            fn to_json(&self) -> Option<serde_json::Value> {
                use $crate::local::server::protobuf::json;
                let $message { $($field,)* $($($zero,)* $($($inline,)*)?)? } = self;
                let mut object = serde_json::Map::new();
                $(json::set(&mut object, messages!(@name $field $($name)?), $field.to_json());)*
                $(
                    $(json::set(
                        &mut object,
                        messages!(@name $zero $($zero_name)?),
                        json::non_zero($zero.to_json()),
                    );)*
                    $($(json::inline(&mut object, $inline.to_json());)*)?
                )?
                Some(serde_json::Value::Object(object))
            }
        }
    )*};
}

pub(super) use messages;
