//! The OpenAPI v3 schemas of values (`openapi/config-values.yaml`,
//! `openapi/values.yaml`), read as addon-operator reads them: `nullable` allowed,
//! `additionalProperties: false` unless a schema says otherwise, `x-extend` merging the
//! config schema into the values schema, `default`s applied before validation, and
//! `x-required-for-helm` (properties required only when the chart is rendered: they
//! join `required` in a second validator used just before rendering). Validation
//! itself is the `jsonschema` crate's (draft 4, OpenAPI 3.0's base).

use jsonschema::{Draft, Validator};
use serde_json::{Map, Value};

/// A compiled values schema.
#[derive(Debug)]
pub(crate) struct Schema {
    /// The schema as read, for defaults (validation uses the compiled form).
    raw: Value,
    validator: Validator,
    /// The validator with `x-required-for-helm` merged into `required`; `None` when
    /// the schema has no such key (the plain validator is then the same).
    helm_validator: Option<Validator>,
}

impl Schema {
    /// Compiles `raw`; `config` is the config schema a values schema may `x-extend`.
    pub(crate) fn new(raw: &Value, config: Option<&Value>) -> Result<Self, String> {
        let mut raw = raw.clone();
        if let (Some(Value::Object(extend)), Some(Value::Object(config))) =
            (raw.get("x-extend").cloned(), config)
        {
            // `x-extend: {schema: config-values.yaml}`: the config schema's properties
            // join the values schema's (whose own win).
            if extend.contains_key("schema") {
                merge_properties(&mut raw, config);
            }
        }
        let compile = |schema: &Value| {
            let mut compiled = schema.clone();
            openapi_to_json_schema(&mut compiled);
            jsonschema::options()
                .with_draft(Draft::Draft4)
                .build(&compiled)
                .map_err(|e| format!("the schema does not compile: {e}"))
        };
        let validator = compile(&raw)?;
        let mut for_helm = raw.clone();
        let helm_validator = if required_for_helm(&mut for_helm)? {
            Some(compile(&for_helm)?)
        } else {
            None
        };
        Ok(Self {
            raw,
            validator,
            helm_validator,
        })
    }

    /// Whether the schema names values required for rendering (`x-required-for-helm`).
    pub(crate) fn has_helm_requirements(&self) -> bool {
        self.helm_validator.is_some()
    }

    /// Every problem of `value` for rendering: [`Schema::problems`] with the
    /// `x-required-for-helm` properties required.
    pub(crate) fn helm_problems(&self, prefix: &str, value: &Value) -> Vec<String> {
        let validator = self.helm_validator.as_ref().unwrap_or(&self.validator);
        report(validator, prefix, value)
    }

    /// Sets every absent property that has a `default` (recursively, through objects
    /// and array items), and returns the JSON pointers it set.
    pub(crate) fn apply_defaults(&self, value: &mut Value) -> Vec<String> {
        let mut set = Vec::new();
        apply_defaults(&self.raw, value, "", &mut set);
        set
    }

    /// Every problem of `value`, as `PATH: REASON` with `PATH` dotted from `prefix`.
    pub(crate) fn problems(&self, prefix: &str, value: &Value) -> Vec<String> {
        report(&self.validator, prefix, value)
    }

    /// Every problem of `value`, as its path dotted from `prefix` and the reason apart.
    pub(crate) fn located_problems(&self, prefix: &str, value: &Value) -> Vec<(String, String)> {
        located(&self.validator, prefix, value)
    }
}

fn report(validator: &Validator, prefix: &str, value: &Value) -> Vec<String> {
    located(validator, prefix, value)
        .into_iter()
        .map(|(path, reason)| format!("{path}: {reason}"))
        .collect()
}

fn located(validator: &Validator, prefix: &str, value: &Value) -> Vec<(String, String)> {
    validator
        .iter_errors(value)
        .map(|e| (dotted(prefix, e.instance_path().as_str()), e.to_string()))
        .collect()
}

/// Merges `x-required-for-helm` (a property name or a list of them) into `required`,
/// at the root and down through `properties`, as addon-operator's
/// `RequiredForHelmTransformer` does; whether any schema had the key.
fn required_for_helm(schema: &mut Value) -> Result<bool, String> {
    let Value::Object(map) = schema else {
        return Ok(false);
    };
    let mut found = false;
    if let Some(extra) = map.get("x-required-for-helm") {
        let names: Vec<Value> = match extra {
            Value::String(name) => vec![Value::String(name.clone())],
            Value::Array(names) if names.iter().all(Value::is_string) => names.clone(),
            other => {
                return Err(format!(
                    "x-required-for-helm: {other} is not a property name or a list of them"
                ));
            }
        };
        let required = map
            .entry("required")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(required) = required {
            for name in names {
                if !required.contains(&name) {
                    required.push(name);
                }
            }
        }
        found = true;
    }
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        for prop in props.values_mut() {
            found |= required_for_helm(prop)?;
        }
    }
    Ok(found)
}

/// `prefix` and a JSON pointer as a dotted path (`echo` + `/a/0/b` → `echo.a[0].b`).
pub fn dotted(prefix: &str, pointer: &str) -> String {
    let mut out = prefix.to_owned();
    for token in pointer.split('/').skip(1) {
        let token = token.replace("~1", "/").replace("~0", "~");
        if !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{token}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&token);
        }
    }
    out
}

fn merge_properties(target: &mut Value, from: &Map<String, Value>) {
    let Some(Value::Object(props)) = from.get("properties") else {
        return;
    };
    let Value::Object(target) = target else {
        return;
    };
    let own = target
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(own) = own {
        for (key, schema) in props {
            own.entry(key.clone()).or_insert_with(|| schema.clone());
        }
    }
    if let Some(Value::Array(required)) = from.get("required") {
        let list = target
            .entry("required")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = list {
            for r in required {
                if !list.contains(r) {
                    list.push(r.clone());
                }
            }
        }
    }
}

/// OpenAPI 3.0's dialect into JSON Schema draft 4: `nullable: true` admits `null`,
/// objects with `properties` refuse unknown keys unless they say otherwise (as
/// addon-operator), and `x-` extensions are dropped.
fn openapi_to_json_schema(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            map.retain(|k, _| !k.starts_with("x-"));
            if map.get("nullable") == Some(&Value::Bool(true))
                && let Some(Value::String(t)) = map.get("type").cloned()
            {
                map.insert("type".into(), serde_json::json!([t, "null"]));
            }
            map.remove("nullable");
            if map.contains_key("properties") && !map.contains_key("additionalProperties") {
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            for (key, child) in map.iter_mut() {
                match key.as_str() {
                    "properties" | "patternProperties" | "definitions" => {
                        if let Value::Object(children) = child {
                            children.values_mut().for_each(openapi_to_json_schema);
                        }
                    }
                    "items" | "additionalProperties" | "not" => openapi_to_json_schema(child),
                    "allOf" | "anyOf" | "oneOf" => {
                        if let Value::Array(children) = child {
                            children.iter_mut().for_each(openapi_to_json_schema);
                        }
                    }
                    _ => {}
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(openapi_to_json_schema),
        _ => {}
    }
}

fn apply_defaults(schema: &Value, value: &mut Value, pointer: &str, set: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            let Some(Value::Object(props)) = schema.get("properties") else {
                return;
            };
            for (key, prop) in props {
                let child = format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"));
                if !map.contains_key(key)
                    && let Some(default) = prop.get("default")
                {
                    map.insert(key.clone(), default.clone());
                    set.push(child.clone());
                }
                if let Some(inner) = map.get_mut(key) {
                    apply_defaults(prop, inner, &child, set);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    apply_defaults(item_schema, item, &format!("{pointer}/{i}"), set);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "replicas": {"type": "integer", "default": 1},
                "image": {"type": "object", "default": {},
                          "properties": {"tag": {"type": "string", "default": "1.0"}}},
                "note": {"type": "string", "nullable": true},
            }
        })
    }

    #[test]
    fn defaults_fill_what_is_absent_and_nothing_else() {
        let schema = Schema::new(&schema(), None).unwrap();
        let mut value = json!({"replicas": 3});
        let set = schema.apply_defaults(&mut value);
        assert_eq!(value, json!({"replicas": 3, "image": {"tag": "1.0"}}));
        assert_eq!(set, ["/image", "/image/tag"]);
    }

    #[test]
    fn problems_name_the_path_and_unknown_keys_are_refused() {
        let schema = Schema::new(&schema(), None).unwrap();
        let problems = schema.problems("echo", &json!({"replicas": "two", "note": null}));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with("echo.replicas: "), "{problems:?}");
        let problems = schema.problems("echo", &json!({"replica": 2}));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("replica"), "{problems:?}");
    }

    #[test]
    fn values_schemas_extend_config_schemas() {
        let config = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let values = json!({"type": "object", "x-extend": {"schema": "config-values.yaml"},
                            "properties": {"b": {"type": "integer"}}});
        let schema = Schema::new(&values, config.as_object().map(|_| &config)).unwrap();
        assert!(schema.problems("m", &json!({"a": "x", "b": 1})).is_empty());
        assert_eq!(schema.problems("m", &json!({"a": 1})).len(), 1);
    }

    #[test]
    fn required_for_helm_is_checked_only_for_rendering() {
        let raw = json!({
            "type": "object",
            "x-required-for-helm": "image",
            "properties": {
                "image": {"type": "string"},
                "tls": {"type": "object", "x-required-for-helm": ["cert", "key"],
                        "properties": {"cert": {"type": "string"}, "key": {"type": "string"}}},
            }
        });
        let schema = Schema::new(&raw, None).unwrap();
        assert!(schema.has_helm_requirements());
        let value = json!({"tls": {"cert": "c"}});
        assert!(schema.problems("m", &value).is_empty());
        let mut problems = schema.helm_problems("m", &value);
        problems.sort();
        assert_eq!(
            problems,
            [
                "m.tls: \"key\" is a required property",
                "m: \"image\" is a required property"
            ]
        );
        let complete = json!({"image": "i", "tls": {"cert": "c", "key": "k"}});
        assert!(schema.helm_problems("m", &complete).is_empty());
        let err =
            Schema::new(&json!({"type": "object", "x-required-for-helm": 3}), None).unwrap_err();
        assert!(err.contains("x-required-for-helm: 3"), "{err}");
    }

    #[test]
    fn dotted_paths() {
        assert_eq!(dotted("echo", "/a/0/b"), "echo.a[0].b");
        assert_eq!(dotted("echo", ""), "echo");
    }
}
