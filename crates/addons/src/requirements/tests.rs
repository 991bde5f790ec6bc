use super::*;
use crate::layout::Layout;

fn module(dir: &Path, name: &str, definition: &str) {
    std::fs::create_dir_all(dir.join(name)).unwrap();
    if !definition.is_empty() {
        std::fs::write(dir.join(name).join(DEFINITION_FILE), definition).unwrap();
    }
}

fn names(layout: &Layout) -> Vec<&str> {
    layout.modules.iter().map(|m| m.name.as_str()).collect()
}

fn platform(kubernetes: &str) -> Platform {
    Platform::new(parse_version(kubernetes))
}

#[test]
fn ranges_read_as_masterminds_writes_them() {
    let v = |t| parse_version(t).unwrap();
    for (range, inside, outside) in [
        (">= 1.27", "1.27.0", "1.26.9"),
        (">=1.27, <1.31", "1.30.2", "1.31.0"),
        (">= 1.27 < 1.31", "1.27.1", "1.31.0"),
        ("~1.2", "1.2.9", "1.3.0"),
        ("^1.0", "1.9.0", "2.0.0"),
        ("1.x", "1.4.0", "2.0.0"),
        ("< 1.25 || >= 1.30", "1.31.0", "1.27.0"),
        (">= v1.28", "1.28.0", "1.27.0"),
    ] {
        let parsed = VersionRange::parse(range).unwrap();
        assert!(parsed.matches(&v(inside)), "{range} {inside}");
        assert!(!parsed.matches(&v(outside)), "{range} {outside}");
        assert_eq!(parsed.to_string(), range);
    }
    for bad in ["", "  ", "banana", ">= 1.x.y.z", ">="] {
        assert!(VersionRange::parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn server_versions_lose_prerelease_and_build() {
    assert_eq!(
        parse_version("v1.29.3-gke.100").unwrap(),
        Version::new(1, 29, 3)
    );
    assert_eq!(
        parse_version("v1.32.0+k3s1").unwrap(),
        Version::new(1, 32, 0)
    );
    assert_eq!(parse_version("v1.30").unwrap(), Version::new(1, 30, 0));
    assert!(parse_version("latest").is_err());
}

#[test]
fn a_full_definition_is_read_and_unused_fields_are_left_alone() {
    let definition = parse_definition(
        "name: ingress\nweight: 410\nversion: v1.4.0\nstage: General Availability\n\
         tags: [network]\ndescription: Ingress.\ncritical: false\n\
         requirements:\n  kubernetes: \">= 1.27\"\n  operon: \">= 0.1\"\n  deckhouse: \">= 1.60\"\n\
         \x20 modules:\n    cert-manager: \">= 1.0\"\n    ingress: \">= 0\"\n",
        "ingress",
    )
    .unwrap();
    assert_eq!(definition.weight, Some(410));
    assert_eq!(definition.version, Some(Version::new(1, 4, 0)));
    assert_eq!(definition.tags, ["network"]);
    assert_eq!(definition.description.as_deref(), Some("Ingress."));
    let requirements = &definition.requirements;
    assert_eq!(
        requirements.kubernetes.as_ref().unwrap().to_string(),
        ">= 1.27"
    );
    assert!(requirements.operon.is_some());
    // A requirement on itself is dropped, as Deckhouse's ModuleDependency drops it.
    let needed: Vec<&String> = requirements.modules.keys().collect();
    assert_eq!(needed, ["cert-manager"]);
}

#[test]
fn a_malformed_definition_names_module_file_field_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    for (text, field, reason) in [
        (
            "requirements: {kubernetes: 1.27 and up}",
            "requirements.kubernetes",
            "not a version range",
        ),
        (
            "requirements: {kubernetes: 127}",
            "requirements.kubernetes",
            "expected a version range",
        ),
        (
            "requirements: {modules: [a, b]}",
            "requirements.modules",
            "expected a mapping",
        ),
        (
            "requirements: {modules: {a: \"\"}}",
            "requirements.modules.a",
            "empty version range",
        ),
        (
            "requirements: {helm: \">= 3\"}",
            "requirements.helm",
            "unknown requirement",
        ),
        (
            "requirements: [kubernetes]",
            "requirements",
            "expected a mapping",
        ),
        ("weight: -1", "weight", "whole number"),
        ("name: other", "name", "not the module's name"),
        ("tags: [1]", "tags[0]", "expected a string"),
        ("[not, a, mapping]", "", "expected a mapping"),
    ] {
        std::fs::write(dir.path().join(DEFINITION_FILE), text).unwrap();
        let err = read_definition(dir.path(), "echo").unwrap_err();
        let AddonError::Definition {
            module,
            path,
            field: got,
            reason: why,
        } = &err
        else {
            panic!("{err}");
        };
        assert_eq!((module.as_str(), got.as_str()), ("echo", field), "{text}");
        assert!(why.contains(reason), "{text}: {why}");
        assert_eq!(path, &dir.path().join(DEFINITION_FILE));
        let message = err.to_string();
        assert!(
            message.starts_with(&format!("module echo: {}: {field}", path.display())),
            "{message}"
        );
    }
}

#[test]
fn a_module_runs_after_the_modules_it_requires_and_keeps_its_place_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    module(
        dir.path(),
        "001-ingress",
        "requirements: {modules: {cert-manager: \">= 0\"}}",
    );
    module(dir.path(), "002-dns", "");
    module(
        dir.path(),
        "005-cert-manager",
        "requirements: {modules: {prometheus-crd: \">= 0\"}}",
    );
    module(dir.path(), "010-monitoring", "");
    module(dir.path(), "020-prometheus-crd", "");
    module(
        dir.path(),
        "030-echo",
        "requirements: {modules: {missing: \">= 0\"}}",
    );
    module(dir.path(), "zz", "weight: 3");
    let layout = Layout::read(dir.path(), None).unwrap();
    assert_eq!(
        names(&layout),
        [
            "dns",
            "zz",
            "monitoring",
            "prometheus-crd",
            "cert-manager",
            "ingress",
            "echo"
        ]
    );
    assert_eq!(layout.module("zz").unwrap().order, Some(3));
}

#[test]
fn a_cycle_is_refused_naming_every_module_in_it() {
    let dir = tempfile::tempdir().unwrap();
    module(
        dir.path(),
        "001-a",
        "requirements: {modules: {b: \">= 0\"}}",
    );
    module(
        dir.path(),
        "002-b",
        "requirements: {modules: {c: \">= 0\"}}",
    );
    module(
        dir.path(),
        "003-c",
        "requirements: {modules: {a: \">= 0\"}}",
    );
    module(
        dir.path(),
        "004-d",
        "requirements: {modules: {a: \">= 0\"}}",
    );
    module(
        dir.path(),
        "005-x",
        "requirements: {modules: {y: \">= 0\"}}",
    );
    module(
        dir.path(),
        "006-y",
        "requirements: {modules: {x: \">= 0\"}}",
    );
    let err = Layout::read(dir.path(), None).unwrap_err();
    let AddonError::RequirementCycle { cycles } = &err else {
        panic!("{err}");
    };
    assert_eq!(cycles, &[vec!["a", "b", "c"], vec!["x", "y"]]);
    assert_eq!(
        err.to_string(),
        "module requirements form a cycle: a, b, c; and x, y"
    );
}

fn read_one(definition: &str, others: &[(&str, &str)]) -> (Layout, ModuleDir) {
    let dir = tempfile::tempdir().unwrap();
    module(dir.path(), "100-app", definition);
    for (name, text) in others {
        module(dir.path(), name, text);
    }
    let layout = Layout::read(dir.path(), None).unwrap();
    let app = layout.module("app").unwrap().clone();
    (layout, app)
}

fn unmet_in(
    layout: &Layout,
    app: &ModuleDir,
    platform: &Platform,
    enabled: &[&str],
) -> Vec<String> {
    let enabled: Vec<String> = enabled.iter().map(|s| (*s).to_owned()).collect();
    unmet(app, platform, &enabled, |name| {
        layout.module(name).map(|m| m.definition.version.clone())
    })
}

#[test]
fn each_kind_of_unmet_requirement_gives_its_reason() {
    let (layout, app) = read_one("requirements: {kubernetes: \">= 1.27\"}", &[]);
    assert!(unmet_in(&layout, &app, &platform("v1.30.1"), &[]).is_empty());
    assert_eq!(
        unmet_in(&layout, &app, &platform("v1.26.3-eks"), &[]),
        ["needs Kubernetes >= 1.27, the cluster runs 1.26.3"]
    );
    let unknown = Platform::new(Err("asking the API server: forbidden".to_owned()));
    assert_eq!(
        unmet_in(&layout, &app, &unknown, &[]),
        [
            "needs Kubernetes >= 1.27, the cluster's version is unknown: asking the API server: forbidden"
        ]
    );

    let (layout, app) = read_one("requirements: {operon: \">= 99\"}", &[]);
    let this = env!("CARGO_PKG_VERSION");
    assert_eq!(
        unmet_in(&layout, &app, &platform("1.30.0"), &[]),
        [format!("needs Operon >= 99, this is {this}")]
    );
    let (layout, app) = read_one(&format!("requirements: {{operon: \"{this}\"}}"), &[]);
    assert!(unmet_in(&layout, &app, &platform("1.30.0"), &[]).is_empty());

    let (layout, app) = read_one(
        "requirements: {modules: {cert-manager: \">= 1.2\", dns: \">= 0\", gone: \"*\", plain: \">= 5\"}}",
        &[
            ("001-cert-manager", "version: 1.1.0"),
            ("002-dns", ""),
            ("003-plain", ""),
        ],
    );
    assert_eq!(
        unmet_in(
            &layout,
            &app,
            &platform("1.30.0"),
            &["cert-manager", "plain"]
        ),
        [
            "needs module cert-manager >= 1.2, which is at 1.1.0",
            "needs module dns, which is disabled",
            "needs module gone, which is not in the modules directory",
        ]
    );
}

/// An addon-operator modules directory whose modules carry Deckhouse-style
/// `module.yaml` files: the order puts each module after what it requires.
#[test]
fn the_requirements_fixture_is_ordered_by_its_requirements() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/module-requirements/modules");
    let layout = Layout::read(&dir, None).unwrap();
    assert_eq!(
        names(&layout),
        [
            "dashboard",
            "prometheus-crd",
            "cert-manager",
            "ingress-nginx",
            "node-metrics",
            "console"
        ]
    );
    let cert_manager = layout.module("cert-manager").unwrap();
    assert_eq!(
        cert_manager.definition.version,
        Some(Version::new(1, 14, 2))
    );
}
