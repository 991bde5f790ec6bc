//! Module sources pulled from a registry served in the test: pushed by
//! `OciClient::push_addon`, pinned, allowed, signed (or not) and unpacked.

use super::*;
use crate::keys::SigningKey;
use crate::oci::{OciOptions, SignRequest};
use crate::oci_modules::AllowList;
use crate::verification::VerificationConfig;
use operon_tests::registry::FakeRegistry;

struct Setup {
    registry: Arc<FakeRegistry>,
    host: String,
    cache: tempfile::TempDir,
    module: tempfile::TempDir,
}

async fn setup() -> Setup {
    let registry = FakeRegistry::new(None);
    let host = registry.serve().await;
    let module = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(module.path().join("hooks")).unwrap();
    std::fs::write(
        module.path().join("module.yaml"),
        "name: echo\nweight: 10\n",
    )
    .unwrap();
    std::fs::write(module.path().join("values.yaml"), "echo: {a: 1}\n").unwrap();
    Setup {
        registry,
        host,
        cache: tempfile::tempdir().unwrap(),
        module,
    }
}

impl Setup {
    fn options(&self) -> OciOptions {
        OciOptions {
            extra_ca_pem: Vec::new(),
            plain_http: vec![self.host.clone()],
        }
    }

    fn modules(
        &self,
        allowed: AllowList,
        verification: Option<Arc<VerificationConfig>>,
    ) -> AddonModules {
        let blobs = crate::BlobStore::open(self.cache.path().join("wasm"), 1 << 20).unwrap();
        let mut oci = OciModules::new(blobs, self.options(), allowed);
        if let Some(verification) = verification {
            oci = oci.with_verification(verification);
        }
        AddonModules::new(Arc::new(oci), self.cache.path().join("addons"))
    }

    async fn push(&self) -> String {
        let archive = addon_archive::pack(self.module.path()).unwrap();
        let tag = format!("oci://{}/modules/echo:1.0", self.host);
        let pushed = OciClient::new(&self.options())
            .push_addon(&tag, &archive, "echo", &RegistryAuth::Anonymous)
            .await
            .unwrap();
        format!("{tag}@{}", pushed.manifest_digest)
    }
}

#[tokio::test]
async fn a_pinned_module_is_pulled_unpacked_and_found_again_by_its_layer() {
    let s = setup().await;
    let pinned = s.push().await;
    let modules = s.modules(AllowList::new([s.host.clone()]), None);
    let pulled = modules
        .pull(&pinned, &RegistryAuth::Anonymous)
        .await
        .unwrap();
    assert_eq!(pulled.reference, pinned);
    assert!(
        pulled
            .pinned
            .starts_with(&format!("oci://{}/modules/echo@sha256:", s.host))
    );
    assert_eq!(
        pulled.path,
        s.cache
            .path()
            .join("addons")
            .join(pulled.layer_digest.strip_prefix("sha256:").unwrap())
    );
    assert_eq!(
        std::fs::read_to_string(pulled.path.join("module.yaml")).unwrap(),
        "name: echo\nweight: 10\n"
    );
    assert!(pulled.path.join("hooks").is_dir());
    let blobs = s.registry.blob_gets();
    let again = modules
        .pull(&pinned, &RegistryAuth::Anonymous)
        .await
        .unwrap();
    assert_eq!(again, pulled);
    assert_eq!(
        s.registry.blob_gets(),
        blobs,
        "the unpacked layer is not downloaded again"
    );
    // Nothing half-unpacked is left beside it.
    let names: Vec<String> = std::fs::read_dir(s.cache.path().join("addons"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[tokio::test]
async fn a_tag_alone_a_registry_off_the_list_and_a_wasm_module_are_refused() {
    let s = setup().await;
    let pinned = s.push().await;
    let modules = s.modules(AllowList::new([s.host.clone()]), None);
    let tag = format!("oci://{}/modules/echo:1.0", s.host);
    let error = modules
        .pull(&tag, &RegistryAuth::Anonymous)
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "ModuleNotPinned", "{error}");
    assert!(
        error.to_string().starts_with(&format!("{tag}: not pinned")),
        "{error}"
    );

    let closed = s.modules(AllowList::new(["registry.example.com".to_owned()]), None);
    let error = closed
        .pull(&pinned, &RegistryAuth::Anonymous)
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "RegistryNotAllowed", "{error}");

    let wasm = s
        .registry
        .publish_wasm("modules/wasm", "1", b"\0asm\x0d\0\x01\0");
    let reference = format!("oci://{}/modules/wasm@{wasm}", s.host);
    let error = modules
        .pull(&reference, &RegistryAuth::Anonymous)
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "WrongArtifactType", "{error}");
    assert!(
        error.to_string().contains("not an addon-operator module artifact: its config is application/vnd.wasm.config.v0+json"),
        "{error}"
    );
}

#[tokio::test]
async fn a_hostile_archive_is_refused_naming_the_reference_and_the_entry() {
    let s = setup().await;
    // A tar whose one entry climbs out of the module.
    let mut header = tar::Header::new_old();
    header.as_old_mut().name[..9].copy_from_slice(b"../escape");
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(1);
    header.set_mode(0o644);
    header.set_cksum();
    let mut builder = tar::Builder::new(Vec::new());
    builder.append(&header, &b"x"[..]).unwrap();
    let archive = builder.into_inner().unwrap();
    let manifest = s.registry.publish(
        "modules/evil",
        "1",
        &archive,
        "application/vnd.oci.image.config.v1+json",
        "application/vnd.oci.image.layer.v1.tar",
    );
    let reference = format!("oci://{}/modules/evil:1@{manifest}", s.host);
    let modules = s.modules(AllowList::any(), None);
    let error = modules
        .pull(&reference, &RegistryAuth::Anonymous)
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "UnsafeModuleArchive");
    assert_eq!(
        error.to_string(),
        format!("{reference}: entry \"../escape\": a path with `..`")
    );
    assert!(!s.cache.path().join("escape").exists());
    assert!(!s.cache.path().join("addons/escape").exists());
}

#[tokio::test]
async fn a_module_must_carry_the_signatures_wasm_modules_must() {
    let s = setup().await;
    let pinned = s.push().await;
    let (key, _) = SigningKey::generate().unwrap();
    let pem: String = (key.public_key().to_pem().lines())
        .map(|l| format!("      {l}\n"))
        .collect();
    let config = s.cache.path().join("verification.yaml");
    std::fs::write(
        &config,
        format!("apiVersion: v1\nallOf:\n  - kind: pubKey\n    owner: release\n    key: |\n{pem}"),
    )
    .unwrap();
    let verification = Arc::new(VerificationConfig::load(&config).unwrap());
    let modules = s.modules(AllowList::any(), Some(verification));
    let error = modules
        .pull(&pinned, &RegistryAuth::Anonymous)
        .await
        .unwrap_err();
    assert_eq!(error.reason(), "SignatureNotVerified", "{error}");
    assert!(!s.cache.path().join("addons").exists(), "nothing unpacked");

    OciClient::new(&s.options())
        .sign(
            &pinned,
            &key,
            &SignRequest::default(),
            &RegistryAuth::Anonymous,
        )
        .await
        .unwrap();
    let pulled = modules
        .pull(&pinned, &RegistryAuth::Anonymous)
        .await
        .unwrap();
    assert!(pulled.path.join("module.yaml").is_file());
}
