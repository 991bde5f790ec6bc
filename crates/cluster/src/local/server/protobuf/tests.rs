//! Protobuf bodies built from k8s-pb's messages, as kubectl's generators send them,
//! decoded into the JSON the API server stores, and through the router into the
//! cluster.

use super::{KINDS, ProtobufError, decode};
use crate::local::LocalCluster;
use crate::local::server::tests::api;
use http::{Method, Request, StatusCode};
use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The body a client sends for `message`: the magic, then the envelope.
fn body<M: Message + k8s_pb::Resource>(message: &M) -> Vec<u8> {
    let envelope = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(M::API_VERSION.into()),
            kind: Some(M::KIND.into()),
        }),
        raw: Some(message.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut body = b"k8s\0".to_vec();
    body.extend(envelope.encode_to_vec());
    body
}

fn some(text: &str) -> Option<String> {
    Some(text.to_owned())
}

/// Metadata as Go's marshaller writes it: every non-pointer field, zero or not, and
/// the zero creation time as an empty message.
fn metadata(name: &str, namespace: &str) -> Option<meta::ObjectMeta> {
    Some(meta::ObjectMeta {
        name: some(name),
        generate_name: some(""),
        namespace: some(namespace),
        self_link: some(""),
        uid: some(""),
        resource_version: some(""),
        generation: Some(0),
        creation_timestamp: Some(meta::Time::default()),
        ..Default::default()
    })
}

#[test]
fn a_configmap_and_a_secret_have_their_data_as_json_writes_it() {
    let config_map = core::ConfigMap {
        metadata: metadata("settings", "default"),
        data: BTreeMap::from([("mode".to_owned(), "fast".to_owned())]),
        binary_data: BTreeMap::from([("blob".to_owned(), vec![0, 1, 2])]),
        immutable: None,
    };
    assert_eq!(
        decode(&body(&config_map)).unwrap(),
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "default", "creationTimestamp": null},
            "data": {"mode": "fast"},
            "binaryData": {"blob": "AAEC"},
        })
    );
    let secret = core::Secret {
        metadata: metadata("creds", "team-a"),
        data: BTreeMap::from([("password".to_owned(), b"pass".to_vec())]),
        r#type: some("Opaque"),
        immutable: Some(false),
        ..Default::default()
    };
    assert_eq!(
        decode(&body(&secret)).unwrap(),
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "creds", "namespace": "team-a", "creationTimestamp": null},
            "data": {"password": "cGFzcw=="},
            "type": "Opaque",
            // A pointer: false is written, as the API server's JSON writes it.
            "immutable": false,
        })
    );
}

/// What `kubectl create deployment web --image=nginx --port=80 --replicas=0` sends,
/// with the zero fields Go's marshaller adds.
fn deployment() -> apps::Deployment {
    let labels = BTreeMap::from([("app".to_owned(), "web".to_owned())]);
    let container = core::Container {
        name: some("nginx"),
        image: some("nginx"),
        working_dir: some(""),
        ports: vec![core::ContainerPort {
            name: some(""),
            container_port: Some(80),
            host_port: Some(0),
            protocol: some(""),
            host_ip: some(""),
        }],
        env: vec![core::EnvVar {
            name: some("PASSWORD"),
            value: some(""),
            value_from: Some(core::EnvVarSource {
                secret_key_ref: Some(core::SecretKeySelector {
                    local_object_reference: Some(core::LocalObjectReference {
                        name: some("creds"),
                    }),
                    key: some("password"),
                    optional: None,
                }),
                ..Default::default()
            }),
        }],
        resources: Some(core::ResourceRequirements {
            limits: BTreeMap::from([(
                "memory".to_owned(),
                Quantity {
                    string: some("128Mi"),
                },
            )]),
            ..Default::default()
        }),
        termination_message_path: some(""),
        image_pull_policy: some(""),
        stdin: Some(false),
        tty: Some(false),
        ..Default::default()
    };
    apps::Deployment {
        metadata: Some(meta::ObjectMeta {
            labels: labels.clone(),
            ..metadata("web", "default").unwrap()
        }),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(0),
            selector: Some(meta::LabelSelector {
                match_labels: labels.clone(),
                match_expressions: vec![],
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta::ObjectMeta {
                    labels,
                    ..metadata("", "").unwrap()
                }),
                spec: Some(core::PodSpec {
                    containers: vec![container],
                    volumes: vec![core::Volume {
                        name: some("config"),
                        volume_source: Some(core::VolumeSource {
                            config_map: Some(core::ConfigMapVolumeSource {
                                local_object_reference: Some(core::LocalObjectReference {
                                    name: some("settings"),
                                }),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }),
                    }],
                    restart_policy: some(""),
                    dns_policy: some(""),
                    service_account_name: some(""),
                    host_network: Some(false),
                    ..Default::default()
                }),
            }),
            strategy: Some(apps::DeploymentStrategy {
                r#type: some("RollingUpdate"),
                rolling_update: Some(apps::RollingUpdateDeployment {
                    max_unavailable: Some(IntOrString {
                        r#type: Some(1),
                        int_val: Some(0),
                        str_val: some("25%"),
                    }),
                    max_surge: Some(IntOrString {
                        r#type: Some(0),
                        int_val: Some(1),
                        str_val: some(""),
                    }),
                }),
            }),
            min_ready_seconds: Some(0),
            paused: Some(false),
            ..Default::default()
        }),
        status: Some(apps::DeploymentStatus::default()),
    }
}

#[test]
fn a_deployment_is_the_json_the_api_server_stores() {
    let object = decode(&body(&deployment())).unwrap();
    assert_eq!(
        object,
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "web",
                "namespace": "default",
                "labels": {"app": "web"},
                "creationTimestamp": null,
            },
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}, "creationTimestamp": null},
                    "spec": {
                        "containers": [{
                            "name": "nginx",
                            "image": "nginx",
                            "ports": [{"containerPort": 80}],
                            "env": [{
                                "name": "PASSWORD",
                                "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}},
                            }],
                            "resources": {"limits": {"memory": "128Mi"}},
                        }],
                        "volumes": [{"name": "config", "configMap": {"name": "settings"}}],
                    },
                },
                "strategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1},
                },
            },
            "status": {},
        })
    );
    // k8s-openapi reads every field back: no name is misspelt.
    let typed: k8s_openapi::api::apps::v1::Deployment =
        serde_json::from_value(object.clone()).unwrap();
    let mut again = serde_json::to_value(typed).unwrap();
    again["metadata"]["creationTimestamp"] = Value::Null;
    again["spec"]["template"]["metadata"]["creationTimestamp"] = Value::Null;
    assert_eq!(again, object);
}

#[test]
fn a_pod_with_every_field_set_keeps_them_all_under_their_json_names() {
    // Every field of a Pod's messages set (by the JSON k8s-openapi writes for a full
    // Pod) must come back: a misnamed field would be dropped by k8s-openapi.
    let pod = core::Pod {
        metadata: metadata("p", "default"),
        spec: Some(core::PodSpec {
            host_ipc: Some(true),
            set_hostname_as_fqdn: Some(true),
            host_aliases: vec![core::HostAlias {
                ip: some("10.0.0.1"),
                hostnames: vec!["a".into()],
            }],
            containers: vec![core::Container {
                name: some("c"),
                security_context: Some(core::SecurityContext {
                    run_as_user: Some(0),
                    allow_privilege_escalation: Some(false),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: Some(core::PodStatus {
            pod_ip: some("10.1.1.1"),
            pod_ips: vec![core::PodIp {
                ip: some("10.1.1.1"),
            }],
            start_time: Some(meta::Time {
                seconds: Some(1_700_000_000),
                nanos: Some(0),
            }),
            ..Default::default()
        }),
    };
    let object = decode(&body(&pod)).unwrap();
    assert_eq!(object["spec"]["hostIPC"], true);
    assert_eq!(object["spec"]["setHostnameAsFQDN"], true);
    assert_eq!(object["spec"]["hostAliases"][0]["ip"], "10.0.0.1");
    let context = &object["spec"]["containers"][0]["securityContext"];
    assert_eq!(context["runAsUser"], 0);
    assert_eq!(context["allowPrivilegeEscalation"], false);
    assert_eq!(object["status"]["podIP"], "10.1.1.1");
    assert_eq!(object["status"]["podIPs"], json!([{"ip": "10.1.1.1"}]));
    assert_eq!(object["status"]["startTime"], "2023-11-14T22:13:20Z");
    let typed: k8s_openapi::api::core::v1::Pod = serde_json::from_value(object.clone()).unwrap();
    let mut again = serde_json::to_value(typed).unwrap();
    again["metadata"]["creationTimestamp"] = Value::Null;
    assert_eq!(again, object);
}

#[test]
fn other_bodies_are_refused_naming_why() {
    let class = k8s_pb::api::storage::v1::StorageClass {
        metadata: metadata("fast", ""),
        provisioner: some("example.com/disk"),
        ..Default::default()
    };
    match decode(&body(&class)) {
        Err(ProtobufError::UnknownKind { api_version, kind }) => {
            assert_eq!(
                (api_version.as_str(), kind.as_str()),
                ("storage.k8s.io/v1", "StorageClass")
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(decode(b"{}"), Err(ProtobufError::NoMagic)));
    assert!(matches!(
        decode(b"k8s\0\x0a\xff"),
        Err(ProtobufError::Envelope(_))
    ));
}

#[test]
fn every_kind_read_from_protobuf_is_one_the_local_cluster_knows() {
    let cluster = LocalCluster::new();
    for (api_version, kind) in KINDS {
        let resource = cluster.resolve(Some(api_version), kind);
        assert!(resource.is_ok(), "{api_version} {kind}: {resource:?}");
    }
}

async fn post(path: &str, body: Vec<u8>) -> (StatusCode, Value) {
    let api = api();
    let request = Request::builder()
        .method(Method::POST)
        .uri(path)
        .header(
            "authorization",
            format!("Bearer {}", super::super::tests::TOKEN),
        )
        .header("content-type", "application/vnd.kubernetes.protobuf")
        .header("accept", "application/vnd.kubernetes.protobuf, */*")
        .header("user-agent", "kubectl/v1.32.4 (linux/amd64)")
        .body(axum::body::Body::from(body))
        .unwrap();
    let answer = api.send(request).await;
    if answer.0 == StatusCode::CREATED {
        let stored = api.stored("Deployment", "default", "web").unwrap();
        assert_eq!(stored["spec"]["replicas"], 0);
        assert_eq!(stored["metadata"]["managedFields"][0]["manager"], "kubectl");
    }
    answer
}

#[tokio::test]
async fn a_protobuf_create_is_stored_and_answered_in_json() {
    let (code, created) = post(
        "/apis/apps/v1/namespaces/default/deployments",
        body(&deployment()),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(created["metadata"]["name"], "web");
    assert!(
        created["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| !u.is_empty())
    );

    let class = k8s_pb::api::storage::v1::StorageClass {
        metadata: metadata("fast", ""),
        ..Default::default()
    };
    let (code, status) = post("/apis/storage.k8s.io/v1/storageclasses", body(&class)).await;
    assert_eq!(code, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{status}");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.contains("StorageClass") && message.contains("kubectl apply -f"),
        "{message}"
    );
}
