//! Conversion between JSON (`serde_json::Value`) and jaq's values, and the JSON text
//! of a value (`tostring`, `tojson`), both with jq's number printing: integral doubles
//! without a fraction, NaN as `null`.

use super::memory;
use jaq_core::box_iter::box_once;
use jaq_core::data::JustLut;
use jaq_core::native::{Fun, v};
use jaq_core::{Native, ValT};
use jaq_json::{Num, Val};
use serde_json::Value;

/// `value` as jaq's value, or `None` when it nests deeper than `depth` levels.
pub(super) fn to_val(value: &Value, depth: usize) -> Option<Val> {
    let nested = |depth: usize| depth.checked_sub(1);
    Some(match value {
        Value::Null => Val::Null,
        Value::Bool(b) => Val::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Val::Num(Num::from_integral(i))
            } else if let Some(u) = n.as_u64() {
                Val::Num(Num::from_integral(u))
            } else {
                Val::from(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => Val::from(s.clone()),
        Value::Array(items) => {
            let depth = nested(depth)?;
            items
                .iter()
                .map(|item| to_val(item, depth))
                .collect::<Option<_>>()?
        }
        Value::Object(map) => {
            let depth = nested(depth)?;
            Val::obj(
                map.iter()
                    .map(|(k, v)| Some((Val::from(k.clone()), to_val(v, depth)?)))
                    .collect::<Option<_>>()?,
            )
        }
    })
}

/// `value` as JSON; an error when it nests deeper than `depth` levels or has an object
/// key that is not a string.
pub(super) fn from_val(value: &Val, depth: usize) -> Result<Value, String> {
    let nested = || {
        depth
            .checked_sub(1)
            .ok_or_else(|| "a value nested too deep".to_owned())
    };
    Ok(match value {
        Val::Null => Value::Null,
        Val::Bool(b) => Value::Bool(*b),
        Val::Num(n) => from_num(n),
        Val::TStr(bytes) | Val::BStr(bytes) => {
            Value::String(String::from_utf8_lossy(bytes).into_owned())
        }
        Val::Arr(items) => {
            let depth = nested()?;
            Value::Array(
                items
                    .iter()
                    .map(|item| from_val(item, depth))
                    .collect::<Result<_, _>>()?,
            )
        }
        Val::Obj(map) => {
            let depth = nested()?;
            let mut object = serde_json::Map::with_capacity(map.len());
            for (key, value) in map.iter() {
                let key = match key {
                    Val::TStr(bytes) | Val::BStr(bytes) => {
                        String::from_utf8_lossy(bytes).into_owned()
                    }
                    other => return Err(format!("object key {other} is not a string")),
                };
                object.insert(key, from_val(value, depth)?);
            }
            Value::Object(object)
        }
    })
}

fn from_num(n: &Num) -> Value {
    match n {
        Num::Int(i) => Value::from(*i as i64),
        Num::Float(f) => from_f64(*f),
        // Big integers and decimal literals: exact when they fit, else as jq does,
        // through a double.
        Num::BigInt(_) | Num::Dec(_) => {
            let text = n.to_string();
            if let Ok(i) = text.parse::<i64>() {
                Value::from(i)
            } else if let Ok(u) = text.parse::<u64>() {
                Value::from(u)
            } else {
                from_f64(text.parse::<f64>().unwrap_or(f64::NAN))
            }
        }
    }
}

/// jq prints integral doubles without a fraction (so `.replicas * 1.0` stays an integer
/// field for Kubernetes), NaN as `null` and infinities as the largest double.
pub(super) fn from_f64(f: f64) -> Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if f.is_nan() {
        Value::Null
    } else if f.is_infinite() {
        Value::from(if f > 0.0 { f64::MAX } else { f64::MIN })
    } else if f.fract() == 0.0 && f.abs() <= EXACT {
        Value::from(f as i64)
    } else {
        serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

/// `_tostring` and `_tojson`, jq's `tostring` and `tojson`: the JSON text of a value
/// with numbers printed as jq prints them (see [`jq_numbers`]); string interpolation
/// goes through `_tostring` too (see `super::prelude`).
pub(super) fn funs() -> [Fun<JustLut<Val>>; 2] {
    [
        (
            "_tostring",
            v(0),
            Native::new(|cv| {
                box_once(match &cv.1 {
                    Val::TStr(_) | Val::BStr(_) => Ok(cv.1),
                    value => memory::spend_text(value).map(|()| to_string(cv.1)),
                })
            }),
        ),
        (
            "_tojson",
            v(0),
            Native::new(|cv| box_once(memory::spend_text(&cv.1).map(|()| to_json(cv.1)))),
        ),
    ]
}

fn to_string(value: Val) -> Val {
    match value {
        Val::TStr(_) | Val::BStr(_) => value.into_string(),
        other => jq_numbers(other).into_string(),
    }
}

fn to_json(value: Val) -> Val {
    match value {
        // jaq's text of a string is the string itself; inside an array it is quoted
        // and escaped as JSON, so the array's brackets are taken off.
        Val::TStr(_) | Val::BStr(_) => match Val::from_iter([value]).into_string() {
            Val::TStr(text) if text.len() >= 2 => {
                Val::TStr(Box::new(text.slice(1..text.len() - 1)))
            }
            other => other,
        },
        other => to_string(other),
    }
}

/// `value` with each number as jq prints it: an integral double without a fraction
/// (jaq prints `2.0`), NaN as `null`, infinities as the largest doubles, and decimal
/// literals (`1.50`) as doubles.
fn jq_numbers(value: Val) -> Val {
    match value {
        Val::Num(Num::Float(f)) => float(f),
        Val::Num(Num::Dec(text)) => float(text.parse().unwrap_or(f64::NAN)),
        Val::Arr(items) => items.iter().cloned().map(jq_numbers).collect(),
        Val::Obj(fields) => Val::obj(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), jq_numbers(v.clone())))
                .collect(),
        ),
        other => other,
    }
}

fn float(f: f64) -> Val {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if f.is_nan() {
        Val::Null
    } else if f.is_infinite() {
        Val::from(if f > 0.0 { f64::MAX } else { f64::MIN })
    } else if f.fract() == 0.0 && f.abs() <= EXACT {
        Val::Num(Num::Int(f as isize))
    } else {
        Val::from(f)
    }
}
