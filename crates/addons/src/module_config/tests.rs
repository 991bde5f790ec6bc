use super::*;
use serde_json::json;

fn write(root: &Path, path: &str, text: &str) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// `echo-server` with a config schema and settings at version 2 (v1 had `count`);
/// `plain` with neither; global settings with a schema.
fn rules() -> (tempfile::TempDir, SettingsRules) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "modules/001-echo-server/openapi/config-values.yaml",
        "type: object\nproperties:\n  replicas: {type: integer, minimum: 1}\n  \
         message: {type: string, default: hi}\n  service:\n    type: object\n    \
         properties:\n      port: {type: integer}\n",
    );
    write(
        d,
        "modules/001-echo-server/openapi/conversions/v2.yaml",
        "version: 2\nconversions:\n  - .replicas = .count | del(.count)\n",
    );
    write(d, "modules/002-plain/values.yaml", "");
    write(
        d,
        "global-hooks/openapi/config-values.yaml",
        "type: object\nproperties:\n  clusterName: {type: string}\n",
    );
    let rules = SettingsRules::read(&d.join("modules"), Some(&d.join("global-hooks"))).unwrap();
    (dir, rules)
}

fn object(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "operon.dev/v1alpha1", "kind": "ModuleConfig",
           "metadata": {"name": name, "generation": 3}, "spec": spec})
}

fn fields(checked: &Checked) -> Vec<&str> {
    checked.problems.iter().map(|p| p.field.as_str()).collect()
}

#[test]
fn settings_are_checked_against_the_config_schema_every_problem_by_field() {
    let (_dir, rules) = rules();
    let checked = rules.check(&object(
        "echo-server",
        json!({"version": 2, "settings": {"replicas": 0, "message": 5,
               "service": {"port": "http"}, "colour": "red"}}),
    ));
    assert!(!checked.accepted());
    assert_eq!(
        checked.target,
        Target::Module {
            name: "echo-server".into(),
            key: "echoServer".into()
        }
    );
    let mut found = fields(&checked);
    found.sort_unstable();
    assert_eq!(
        found,
        [
            "spec.settings",
            "spec.settings.message",
            "spec.settings.replicas",
            "spec.settings.service.port"
        ]
    );
    let unknown = checked
        .problems
        .iter()
        .find(|p| p.field == "spec.settings")
        .unwrap();
    assert!(unknown.reason.contains("colour"), "{unknown:?}");
    assert_eq!(checked.problems[0].object, "ModuleConfig/echo-server");
    assert_eq!(checked.settings, None);
    assert_eq!(checked.generation, Some(3));

    let good = rules.check(&object(
        "echo-server",
        json!({"enabled": true, "version": 2, "settings": {"replicas": 2}}),
    ));
    assert!(good.accepted(), "{:?}", good.problems);
    assert!(good.warnings.is_empty(), "{:?}", good.warnings);
    assert_eq!(good.settings, Some(json!({"replicas": 2})));
    assert_eq!(good.enabled, Some(true));
    assert_eq!(good.version, 2);
}

#[test]
fn the_version_is_required_with_settings_and_older_ones_are_converted() {
    let (_dir, rules) = rules();
    let missing = rules.check(&object("echo-server", json!({"settings": {"replicas": 2}})));
    assert_eq!(fields(&missing), ["spec.version"]);
    assert!(
        missing.problems[0].reason.contains("the latest is 2"),
        "{:?}",
        missing.problems
    );

    let old = rules.check(&object(
        "echo-server",
        json!({"version": 1, "settings": {"count": 3}}),
    ));
    assert!(old.accepted(), "{:?}", old.problems);
    assert_eq!(old.settings, Some(json!({"replicas": 3})));
    assert!(
        old.warnings[0].starts_with("spec.version 1 is older than the latest of module echo-server, 2: the settings were converted"),
        "{:?}",
        old.warnings
    );
    // What the conversion gives is checked, and the problem says so.
    let bad = rules.check(&object(
        "echo-server",
        json!({"version": 1, "settings": {"count": "three"}}),
    ));
    assert_eq!(fields(&bad), ["spec.settings.replicas"]);
    assert!(
        bad.problems[0]
            .reason
            .ends_with("(in the settings converted from version 1 to 2)"),
        "{:?}",
        bad.problems
    );

    let future = rules.check(&object(
        "echo-server",
        json!({"version": 3, "settings": {"replicas": 1}}),
    ));
    assert_eq!(fields(&future), ["spec.version"]);
    assert_eq!(
        future.problems[0].reason,
        "version 3 is not supported by module echo-server: write version 2, or one of 1 (converted)"
    );
    // Without settings a version is only worth a warning.
    let bare = rules.check(&object(
        "echo-server",
        json!({"version": 3, "enabled": true}),
    ));
    assert!(bare.accepted());
    assert_eq!(bare.settings, Some(json!({})));
    assert_eq!(bare.warnings.len(), 2, "{:?}", bare.warnings);
    let none = rules.check(&object("plain", json!({})));
    assert!(none.accepted() && none.warnings.is_empty());
    assert_eq!(none.version, 1);
}

#[test]
fn a_disabled_module_is_taken_whatever_its_settings_say() {
    let (_dir, rules) = rules();
    let checked = rules.check(&object(
        "echo-server",
        json!({"enabled": false, "version": 2, "settings": {"replicas": "many", "x": 1}}),
    ));
    assert!(checked.accepted(), "{:?}", checked.problems);
    assert_eq!(checked.enabled, Some(false));
    assert_eq!(
        checked.settings, None,
        "settings that do not match are left out"
    );
    assert!(
        checked.warnings[0].contains("spec.settings.replicas: ")
            && checked.warnings[0].contains(", and 1 more")
            && checked.warnings[0].contains("not used while the module is disabled"),
        "{:?}",
        checked.warnings
    );
    // A version no conversion reaches is refused all the same (Deckhouse's validateCR).
    let checked = rules.check(&object(
        "echo-server",
        json!({"enabled": false, "version": 9, "settings": {"replicas": 1}}),
    ));
    assert_eq!(fields(&checked), ["spec.version"]);
}

#[test]
fn global_settings_cannot_be_disabled_and_unknown_modules_are_warned_about() {
    let (_dir, rules) = rules();
    let checked = rules.check(&object(
        "global",
        json!({"enabled": true, "version": 1, "settings": {"clusterName": 7}}),
    ));
    assert_eq!(checked.target, Target::Global);
    assert_eq!(checked.target.key(), Some("global"));
    assert_eq!(
        fields(&checked),
        ["spec.enabled", "spec.settings.clusterName"]
    );
    let checked = rules.check(&object(
        "global",
        json!({"version": 1, "settings": {"clusterName": 7}}),
    ));
    assert_eq!(fields(&checked), ["spec.settings.clusterName"]);

    let unknown = rules.check(&object(
        "no-such-module",
        json!({"enabled": true, "settings": {"anything": 1}}),
    ));
    assert!(unknown.accepted());
    assert_eq!(unknown.target, Target::Unknown);
    assert_eq!(unknown.settings, None);
    assert_eq!(
        unknown.warnings,
        ["no module \"no-such-module\" in the modules directory: nothing uses this ModuleConfig"]
    );
}

#[test]
fn a_field_of_the_wrong_type_does_not_hide_the_settings_problems() {
    let (_dir, rules) = rules();
    let checked = rules.check(&object(
        "echo-server",
        json!({"enabled": "yes", "version": 2, "settings": {"replicas": 0}}),
    ));
    assert_eq!(fields(&checked), ["spec.enabled", "spec.settings.replicas"]);
    // A version that cannot be read is reported once, and the settings wait for it.
    let checked = rules.check(&object(
        "echo-server",
        json!({"version": "two", "settings": {"replicas": 0}}),
    ));
    assert_eq!(fields(&checked), ["spec.version"]);
}

#[test]
fn deckhouses_fields_operon_does_not_support_are_refused_by_name() {
    let (_dir, rules) = rules();
    let checked = rules.check(&object(
        "echo-server",
        json!({"enabled": true, "maintenance": "NoResourceReconciliation",
               "updatePolicy": "stable", "source": "deckhouse"}),
    ));
    assert_eq!(
        fields(&checked),
        ["spec.maintenance", "spec.updatePolicy", "spec.source"]
    );
    assert!(
        checked.problems[0]
            .reason
            .starts_with("Deckhouse's maintenance mode is not supported"),
        "{:?}",
        checked.problems
    );
}

#[test]
fn fields_of_the_wrong_type_are_each_named() {
    let (_dir, rules) = rules();
    let checked = rules.check(&object(
        "echo-server",
        json!({"enabled": "yes", "version": 0, "settings": ["replicas"]}),
    ));
    assert_eq!(
        fields(&checked),
        ["spec.enabled", "spec.version", "spec.settings"]
    );
    assert_eq!(
        checked.problems[1].reason,
        "0 is not a settings version (an integer of 1 or more)"
    );
}
