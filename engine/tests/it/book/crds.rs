//! The CRD reference, rendered from the API types' schemas.

use super::*;
use console::{align, diff, output_lines};

// ---------------------------------------------------------------------------------------
// The CRD reference

/// `docs/src/reference/crds.md` as the API types' CRDs (what `operon crds` prints) make it.
fn crd_reference() -> String {
    let crds: Vec<serde_json::Value> = operon::api::crds()
        .iter()
        .map(|crd| serde_json::to_value(crd).unwrap())
        .collect();
    let mut page = String::from(
        "# CRD reference\n\n\
         <!-- Generated from the API types (`operon crds`) by engine/tests/it/book: \
         OPERON_BLESS=1 cargo test -p operon-engine --test it book:: rewrites it. -->\n\n\
         The custom resources of `operon.dev/v1alpha1`, field by field, as the API server \
         checks them: `operon crds` prints the same definitions, which \
         `deploy/crds/operon.dev.yaml` and the Helm chart install. A field is required \
         when its object must have it; `kubectl explain` shows the same descriptions \
         in a cluster.\n",
    );
    for crd in &crds {
        let spec = &crd["spec"];
        let names = &spec["names"];
        let kind = names["kind"].as_str().unwrap();
        let version = &spec["versions"][0];
        let schema = &version["schema"]["openAPIV3Schema"];
        write!(page, "\n## {kind}\n\n").unwrap();
        let short: Vec<String> = names["shortNames"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|n| format!("`{}`", n.as_str().unwrap()))
            .collect();
        write!(
            page,
            "`{}/{}`, {}-scoped; `kubectl get {}`{}.",
            spec["group"].as_str().unwrap(),
            version["name"].as_str().unwrap(),
            spec["scope"].as_str().unwrap(),
            names["plural"].as_str().unwrap(),
            if short.is_empty() {
                String::new()
            } else {
                format!(" (short names {})", short.join(", "))
            }
        )
        .unwrap();
        let columns: Vec<String> = version["additionalPrinterColumns"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                format!(
                    "{} (`{}`)",
                    c["name"].as_str().unwrap(),
                    c["jsonPath"].as_str().unwrap()
                )
            })
            .collect();
        if !columns.is_empty() {
            write!(page, " Its columns: {}.", columns.join(", ")).unwrap();
        }
        if version["subresources"]["status"].is_object() {
            page.push_str(" The status is a subresource.");
        }
        page.push_str("\n\n| Field | Type | Required | Description |\n|---|---|---|---|\n");
        let mut rows = Vec::new();
        fields(schema, "", &mut rows);
        for (path, ty, required, description) in rows {
            if ["apiVersion", "kind", "metadata"].contains(&path.as_str()) {
                continue;
            }
            writeln!(
                page,
                "| `{path}` | {} | {} | {} |",
                cell(&ty),
                if required { "yes" } else { "" },
                cell(&description)
            )
            .unwrap();
        }
    }
    page
}

/// The rows (path, type, required, description) of every field under `schema`.
fn fields(schema: &serde_json::Value, path: &str, rows: &mut Vec<(String, String, bool, String)>) {
    if let Some(properties) = schema["properties"].as_object() {
        let required: BTreeSet<&str> = schema["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r.as_str())
            .collect();
        let properties: BTreeMap<&String, &serde_json::Value> = properties.iter().collect();
        for (name, field) in properties {
            let field_path = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            let description = field["description"]
                .as_str()
                .unwrap_or("")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            rows.push((
                field_path.clone(),
                type_of(field),
                required.contains(name.as_str()),
                description,
            ));
            fields(field, &field_path, rows);
        }
    }
    if schema["items"].is_object() {
        fields(&schema["items"], &format!("{path}[]"), rows);
    }
    if schema["additionalProperties"].is_object() {
        fields(
            &schema["additionalProperties"],
            &format!("{path}.<key>"),
            rows,
        );
    }
}

fn type_of(schema: &serde_json::Value) -> String {
    if schema["x-kubernetes-preserve-unknown-fields"] == true && schema["properties"].is_null() {
        return "object (any fields)".into();
    }
    if schema["x-kubernetes-int-or-string"] == true {
        return "integer or string".into();
    }
    let mut ty = match schema["type"].as_str() {
        Some("array") => format!("array of {}", type_of(&schema["items"])),
        Some("object") if schema["additionalProperties"].is_object() => {
            format!("map of {}", type_of(&schema["additionalProperties"]))
        }
        Some(other) => other.to_owned(),
        None => "any".to_owned(),
    };
    if let Some(format) = schema["format"].as_str() {
        write!(ty, " ({format})").unwrap();
    }
    if let Some(values) = schema["enum"].as_array() {
        let values: Vec<String> = values
            .iter()
            .map(|v| format!("`{}`", unquoted(v)))
            .collect();
        write!(ty, ": {}", values.join(", ")).unwrap();
    }
    ty
}

fn unquoted(value: &serde_json::Value) -> String {
    value
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| value.to_string())
}

/// Text made safe for a table cell: pipes escaped, and `<`/`>` outside code spans
/// written as entities so that no text passes for HTML.
fn cell(text: &str) -> String {
    text.split('`')
        .enumerate()
        .map(|(n, part)| {
            let part = part.replace('|', "\\|");
            if n % 2 == 0 {
                part.replace('<', "&lt;").replace('>', "&gt;")
            } else {
                part
            }
        })
        .collect::<Vec<_>>()
        .join("`")
}

#[test]
fn the_crd_reference_is_what_the_api_types_produce() {
    let page = book_src().join("reference/crds.md");
    let generated = crd_reference();
    if blessing() {
        std::fs::write(&page, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&page).unwrap_or_default();
    if committed != generated {
        let edits = align(&output_lines(&committed), &output_lines(&generated));
        let changed: String = diff(&edits)
            .lines()
            .filter(|l| l.trim_start().starts_with(['-', '+']))
            .take(40)
            .map(|l| format!("{l}\n"))
            .collect();
        panic!(
            "docs/src/reference/crds.md is not what the API types produce ({BLESS_HINT} \
             rewrites it):\n{changed}"
        );
    }
}
