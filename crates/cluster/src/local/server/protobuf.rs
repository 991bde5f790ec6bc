//! Protobuf request bodies (`application/vnd.kubernetes.protobuf`), which kubectl's
//! `create <generator>` commands (`create configmap`, `create deployment`, ...) and
//! `run`/`expose` send for built-in kinds: the API server's envelope (the magic
//! `k8s\0`, then a `runtime.Unknown` naming the type around the object's message) is
//! opened, the object decoded with k8s-pb's messages and written as the JSON the API
//! server would store, so the rest of the server sees a JSON body. Answers stay JSON:
//! kubectl asks for protobuf first but accepts JSON, and reads the answer by its
//! Content-Type.

mod core_v1;
mod groups;
mod json;

use json::ToJson;
use k8s_pb::Resource;
use prost::Message;
use serde_json::Value;

/// The four bytes before every protobuf body (`k8s` and a NUL).
const MAGIC: &[u8] = b"k8s\0";

/// Why a protobuf body could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProtobufError {
    /// The body does not start with the envelope's magic bytes.
    #[error("the body is not a Kubernetes protobuf envelope: it does not start with \"k8s\\0\"")]
    NoMagic,
    /// The envelope (`runtime.Unknown`) does not decode.
    #[error("cannot decode the protobuf envelope")]
    Envelope(#[source] prost::DecodeError),
    /// The object inside is compressed or otherwise encoded.
    #[error("the protobuf envelope's content encoding is {0:?}: only plain bodies are read")]
    Encoding(String),
    /// The object's message does not decode.
    #[error("cannot decode the {kind} ({api_version}) protobuf message")]
    Message {
        /// The envelope's apiVersion.
        api_version: String,
        /// The envelope's kind.
        kind: String,
        /// What prost found.
        #[source]
        source: prost::DecodeError,
    },
    /// A type this server does not decode from protobuf.
    #[error("{kind} ({api_version}) in protobuf")]
    UnknownKind {
        /// The envelope's apiVersion.
        api_version: String,
        /// The envelope's kind.
        kind: String,
    },
}

/// The object in a protobuf body as JSON, with its `apiVersion` and `kind`.
pub(crate) fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    let message = body.strip_prefix(MAGIC).ok_or(ProtobufError::NoMagic)?;
    let envelope = k8s_pb::apimachinery::pkg::runtime::Unknown::decode(message)
        .map_err(ProtobufError::Envelope)?;
    if let Some(encoding) = envelope.content_encoding.filter(|e| !e.is_empty()) {
        return Err(ProtobufError::Encoding(encoding));
    }
    let type_meta = envelope.type_meta.unwrap_or_default();
    let api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    let raw = envelope.raw.unwrap_or_default();
    let Some(decoded) = object(&api_version, &kind, &raw) else {
        return Err(ProtobufError::UnknownKind { api_version, kind });
    };
    let mut object = decoded.map_err(|source| ProtobufError::Message {
        api_version: api_version.clone(),
        kind: kind.clone(),
        source,
    })?;
    if let Value::Object(fields) = &mut object {
        fields.insert("apiVersion".into(), api_version.into());
        fields.insert("kind".into(), kind.into());
    }
    Ok(object)
}

/// Decodes `raw` as `T` and writes its JSON.
fn convert<T: Message + Default + ToJson>(raw: &[u8]) -> Result<Value, prost::DecodeError> {
    Ok(T::decode(raw)?
        .to_json()
        .unwrap_or_else(|| Value::Object(Default::default())))
}

macro_rules! kinds {
    ($($kind:ty),* $(,)?) => {
        /// The kinds read from protobuf, as `apiVersion` and `kind`.
        #[cfg(test)]
        pub(crate) const KINDS: &[(&str, &str)] = &[
            $((<$kind as Resource>::API_VERSION, <$kind as Resource>::KIND)),*
        ];

        /// The object of type `api_version`/`kind` in `raw`, or `None` for a type
        /// not read from protobuf.
        fn object(
            api_version: &str,
            kind: &str,
            raw: &[u8],
        ) -> Option<Result<Value, prost::DecodeError>> {
            $(
                if api_version == <$kind as Resource>::API_VERSION
                    && kind == <$kind as Resource>::KIND
                {
                    return Some(convert::<$kind>(raw));
                }
            )*
            None
        }
    };
}

kinds![
    k8s_pb::api::core::v1::ConfigMap,
    k8s_pb::api::core::v1::Secret,
    k8s_pb::api::core::v1::Namespace,
    k8s_pb::api::core::v1::ServiceAccount,
    k8s_pb::api::core::v1::Service,
    k8s_pb::api::core::v1::Pod,
    k8s_pb::api::core::v1::PodTemplate,
    k8s_pb::api::core::v1::ReplicationController,
    k8s_pb::api::core::v1::ResourceQuota,
    k8s_pb::api::core::v1::LimitRange,
    k8s_pb::api::core::v1::PersistentVolumeClaim,
    k8s_pb::api::core::v1::Endpoints,
    k8s_pb::api::apps::v1::Deployment,
    k8s_pb::api::apps::v1::StatefulSet,
    k8s_pb::api::apps::v1::DaemonSet,
    k8s_pb::api::apps::v1::ReplicaSet,
    k8s_pb::api::batch::v1::Job,
    k8s_pb::api::batch::v1::CronJob,
    k8s_pb::api::rbac::v1::Role,
    k8s_pb::api::rbac::v1::RoleBinding,
    k8s_pb::api::rbac::v1::ClusterRole,
    k8s_pb::api::rbac::v1::ClusterRoleBinding,
    k8s_pb::api::scheduling::v1::PriorityClass,
    k8s_pb::api::policy::v1::PodDisruptionBudget,
    k8s_pb::api::networking::v1::Ingress,
    k8s_pb::api::networking::v1::IngressClass,
    k8s_pb::api::networking::v1::NetworkPolicy,
];

#[cfg(test)]
mod tests;
