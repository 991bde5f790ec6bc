//! Cluster access for script hooks that call `kubectl` themselves, as many
//! shell-operator hooks do: an opt-in, per hook or for the whole hooks directory, that
//! gives a hook the network and the pod's ServiceAccount credentials read-only.
//!
//! Locally (`operon hook test`, `operon hook run`) the credentials are those of the
//! local cluster's API server (`operon_cluster::local::LocalApi`): a directory with a
//! kubeconfig, passed as `KUBECONFIG`, instead of the pod's in-cluster variables.
//!
//! Without it a script hook has no network and no credentials: it changes the cluster
//! only through `$KUBERNETES_PATCH_PATH`. With it the hook can do anything the engine's
//! ServiceAccount may do, which is what it could do under shell-operator; every other
//! protection of the sandbox stays, and each run reports the network namespace as not
//! requested. [`looks_like_a_cluster_call`] recognises the failure of a hook that tried
//! to reach a cluster without access, so that the error can say so.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Where the kubelet mounts a pod's ServiceAccount token, CA and namespace.
pub(crate) const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The variables client-go's in-cluster configuration (and so kubectl) reads.
pub(crate) const SERVICE_ENV: [&str; 2] = ["KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"];

/// The kubeconfig of a local API server's credentials directory.
const LOCAL_KUBECONFIG: &str = "kubeconfig";

/// The files of [`SERVICE_ACCOUNT_DIR`] kubectl needs.
const CREDENTIAL_FILES: [&str; 2] = ["token", "ca.crt"];

/// Why cluster access cannot be given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterAccessError {
    /// The scope names nothing.
    #[error("cluster access: name the hooks (comma-separated, as in `operon hook list`) or `all`")]
    EmptyScope,
    /// A credential file is missing: not running in a pod with a mounted token.
    #[error(
        "cluster access: no ServiceAccount {file} in {dir} (is the engine running in a pod \
         with automountServiceAccountToken?)"
    )]
    MissingCredential {
        /// The directory looked in.
        dir: PathBuf,
        /// The file missing.
        file: &'static str,
    },
    /// A variable of the in-cluster configuration is not set.
    #[error("cluster access: {0} is not set (the kubelet sets it in every pod)")]
    MissingVariable(&'static str),
}

/// Which hooks get cluster access.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessScope {
    /// Every script hook of the directory.
    All,
    /// The hooks with these names (paths relative to the hooks directory).
    Hooks(BTreeSet<String>),
}

impl std::str::FromStr for AccessScope {
    type Err = ClusterAccessError;

    /// `all`, or hook names separated by commas.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.trim() == "all" {
            return Ok(Self::All);
        }
        let names: BTreeSet<String> = text
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .map(str::to_owned)
            .collect();
        if names.is_empty() {
            return Err(ClusterAccessError::EmptyScope);
        }
        Ok(Self::Hooks(names))
    }
}

/// The credentials and the hooks that get them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterAccess {
    scope: AccessScope,
    credentials: PathBuf,
    env: Vec<(String, String)>,
}

impl ClusterAccess {
    /// Access for `scope` with the credentials of the pod the engine runs in.
    pub fn from_pod(scope: AccessScope) -> Result<Self, ClusterAccessError> {
        let env = SERVICE_ENV
            .iter()
            .map(|name| {
                std::env::var(name)
                    .map(|value| ((*name).to_owned(), value))
                    .map_err(|_| ClusterAccessError::MissingVariable(name))
            })
            .collect::<Result<_, _>>()?;
        Self::new(scope, Path::new(SERVICE_ACCOUNT_DIR), env)
    }

    /// Access for `scope` with the credentials in `dir` and the in-cluster variables
    /// `env`; the directory must hold a token and a CA.
    pub fn new(
        scope: AccessScope,
        dir: &Path,
        env: Vec<(String, String)>,
    ) -> Result<Self, ClusterAccessError> {
        for file in CREDENTIAL_FILES {
            if !dir.join(file).exists() {
                return Err(ClusterAccessError::MissingCredential {
                    dir: dir.to_owned(),
                    file,
                });
            }
        }
        Ok(Self {
            scope,
            credentials: dir.to_owned(),
            env,
        })
    }

    /// Access for `scope` to a local API server whose kubeconfig (with `token` and
    /// `ca.crt` beside it) is in `dir`: the hooks get `KUBECONFIG` pointing there.
    pub fn local(scope: AccessScope, dir: &Path) -> Result<Self, ClusterAccessError> {
        let kubeconfig = dir.join(LOCAL_KUBECONFIG);
        if !kubeconfig.exists() {
            return Err(ClusterAccessError::MissingCredential {
                dir: dir.to_owned(),
                file: LOCAL_KUBECONFIG,
            });
        }
        let env = vec![(
            "KUBECONFIG".to_owned(),
            kubeconfig.to_string_lossy().into_owned(),
        )];
        Self::new(scope, dir, env)
    }

    /// Whether the credentials are a local API server's, which can reach no real
    /// cluster (nothing to warn about).
    pub(crate) fn is_local(&self) -> bool {
        self.env.iter().any(|(name, _)| name == "KUBECONFIG")
    }

    /// Whether the hook called `name` gets access.
    pub fn grants(&self, name: &str) -> bool {
        match &self.scope {
            AccessScope::All => true,
            AccessScope::Hooks(names) => names.contains(name),
        }
    }

    /// The names of the scope that are not among `hooks`, to warn about a typo that
    /// would leave a hook without the access it was meant to get.
    pub(crate) fn unknown<'a>(&'a self, hooks: &[&str]) -> Vec<&'a str> {
        match &self.scope {
            AccessScope::All => Vec::new(),
            AccessScope::Hooks(names) => names
                .iter()
                .filter(|name| !hooks.contains(&name.as_str()))
                .map(String::as_str)
                .collect(),
        }
    }

    /// The directory of the credentials, to be readable by the hooks granted access.
    pub(crate) fn credentials(&self) -> &Path {
        &self.credentials
    }

    /// The in-cluster variables the hooks granted access get.
    pub(crate) fn env(&self) -> &[(String, String)] {
        &self.env
    }
}

/// What kubectl and client-go print when no cluster can be reached or no credentials
/// are configured.
const CLUSTER_CALL_FAILURES: &[&str] = &[
    "The connection to the server",
    "Unable to connect to the server",
    "couldn't get current server API group list",
    "no configuration has been provided",
    "unable to load in-cluster configuration",
    "You must be logged in to the server",
    "dial tcp",
    "connect: network is unreachable",
];

/// Whether a failed hook's stderr shows that it tried to reach a Kubernetes API server
/// (kubectl or another client) and could not.
pub(crate) fn looks_like_a_cluster_call(stderr: &str) -> bool {
    CLUSTER_CALL_FAILURES
        .iter()
        .any(|needle| stderr.contains(needle))
}

/// The sentence added to the error of such a run.
pub(crate) const CLUSTER_CALL_HINT: &str = "the hook seems to have tried to reach a Kubernetes API \
     server itself (e.g. with kubectl): script hooks get no network and no credentials; \
     change objects through $KUBERNETES_PATCH_PATH, or, under `operon serve`, allow this \
     hook with --hook-cluster-access";

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for file in ["token", "ca.crt", "namespace"] {
            std::fs::write(dir.path().join(file), "x").unwrap();
        }
        dir
    }

    #[test]
    fn scopes_are_all_or_a_list_of_names() {
        assert_eq!("all".parse(), Ok(AccessScope::All));
        assert_eq!(
            " a.sh, sub/b.sh ,".parse(),
            Ok(AccessScope::Hooks(
                ["a.sh", "sub/b.sh"].map(str::to_owned).into()
            ))
        );
        assert_eq!(
            " , ".parse::<AccessScope>(),
            Err(ClusterAccessError::EmptyScope)
        );
    }

    #[test]
    fn access_is_granted_by_name_with_the_credentials_and_variables() {
        let dir = credentials();
        let env = vec![("KUBERNETES_SERVICE_HOST".to_owned(), "10.0.0.1".to_owned())];
        let access =
            ClusterAccess::new("kubectl.sh".parse().unwrap(), dir.path(), env.clone()).unwrap();
        assert!(access.grants("kubectl.sh"));
        assert!(!access.grants("other.sh"));
        assert_eq!(access.unknown(&["other.sh"]), ["kubectl.sh"]);
        assert_eq!(access.credentials(), dir.path());
        assert_eq!(access.env(), env);
    }

    #[test]
    fn missing_credentials_are_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "x").unwrap();
        let error = ClusterAccess::new(AccessScope::All, dir.path(), Vec::new()).unwrap_err();
        assert!(
            error.to_string().contains("no ServiceAccount ca.crt"),
            "{error}"
        );
    }

    #[test]
    fn local_access_points_kubectl_at_the_kubeconfig() {
        let dir = credentials();
        let error = ClusterAccess::local(AccessScope::All, dir.path()).unwrap_err();
        assert!(
            error.to_string().contains("no ServiceAccount kubeconfig"),
            "{error}"
        );
        std::fs::write(dir.path().join("kubeconfig"), "x").unwrap();
        let access = ClusterAccess::local(AccessScope::All, dir.path()).unwrap();
        assert!(access.grants("any.sh"));
        assert!(access.is_local());
        assert_eq!(access.credentials(), dir.path());
        assert_eq!(
            access.env(),
            [(
                "KUBECONFIG".to_owned(),
                dir.path().join("kubeconfig").to_string_lossy().into_owned()
            )]
        );
    }

    #[test]
    fn kubectl_failures_are_recognised() {
        assert!(looks_like_a_cluster_call(
            "The connection to the server localhost:8080 was refused - did you specify the right host or port?"
        ));
        assert!(looks_like_a_cluster_call(
            "E1123 couldn't get current server API group list: Get \"https://10.0.0.1:443/api\": dial tcp 10.0.0.1:443: connect: network is unreachable"
        ));
        assert!(!looks_like_a_cluster_call("jq: error: null has no keys"));
    }
}
