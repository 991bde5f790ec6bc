//! The JSON of core/v1's messages, from their field lists (see [`super::json`]): the
//! kinds kubectl makes in the core group and every message they contain.

use super::json::messages;
use k8s_pb::api::core::v1::*;

messages! {
    ConfigMap { metadata, immutable, data, binary_data }
    Secret { metadata, immutable, data, string_data; r#type }
    Namespace { metadata, spec, status }
    NamespaceSpec { finalizers }
    NamespaceStatus { conditions; phase }
    NamespaceCondition { r#type, status, last_transition_time; reason, message }
    ServiceAccount { metadata, secrets, image_pull_secrets, automount_service_account_token }
    ObjectReference { ; kind, namespace, name, uid, api_version, resource_version, field_path }
    LocalObjectReference { ; name }
    Service { metadata, spec, status }
    ServiceSpec { ports, selector, cluster_ips = "clusterIPs", external_ips = "externalIPs",
        load_balancer_source_ranges, session_affinity_config, ip_families, ip_family_policy,
        allocate_load_balancer_node_ports, load_balancer_class, internal_traffic_policy,
        traffic_distribution; cluster_ip = "clusterIP", r#type, session_affinity,
        load_balancer_ip = "loadBalancerIP", external_name, external_traffic_policy,
        health_check_node_port, publish_not_ready_addresses }
    ServicePort { app_protocol, port, target_port; name, protocol, node_port }
    SessionAffinityConfig { client_ip = "clientIP" }
    ClientIpConfig { timeout_seconds }
    ServiceStatus { load_balancer, conditions }
    LoadBalancerStatus { ingress }
    LoadBalancerIngress { ip_mode, ports; ip, hostname }
    PortStatus { port, protocol, error }
    Pod { metadata, spec, status }
    PodSpec { volumes, init_containers, containers, ephemeral_containers,
        termination_grace_period_seconds, active_deadline_seconds, node_selector,
        automount_service_account_token, share_process_namespace, security_context,
        image_pull_secrets, affinity, tolerations, host_aliases, priority, dns_config,
        readiness_gates, runtime_class_name, enable_service_links, preemption_policy, overhead,
        topology_spread_constraints, set_hostname_as_fqdn = "setHostnameAsFQDN", os, host_users,
        scheduling_gates, resource_claims, resources, hostname_override, workload_ref;
        restart_policy, dns_policy, service_account_name, service_account, node_name,
        host_network, host_pid = "hostPID", host_ipc = "hostIPC", hostname, subdomain,
        scheduler_name, priority_class_name }
    Volume { name; ; volume_source }
    VolumeSource { host_path, empty_dir, gce_persistent_disk, aws_elastic_block_store, git_repo,
        secret, nfs, iscsi, glusterfs, persistent_volume_claim, rbd, flex_volume, cinder,
        cephfs, flocker, downward_api = "downwardAPI", fc, azure_file, config_map,
        vsphere_volume, quobyte, azure_disk, photon_persistent_disk, projected, portworx_volume,
        scale_io = "scaleIO", storageos, csi, ephemeral, image }
    HostPathVolumeSource { path, r#type }
    EmptyDirVolumeSource { size_limit; medium }
    GcePersistentDiskVolumeSource { pd_name; fs_type, partition, read_only }
    AwsElasticBlockStoreVolumeSource { volume_id = "volumeID"; fs_type, partition, read_only }
    GitRepoVolumeSource { repository; revision, directory }
    SecretVolumeSource { items, default_mode, optional; secret_name }
    KeyToPath { key, path, mode }
    NfsVolumeSource { server, path; read_only }
    IscsiVolumeSource { target_portal, iqn, lun, portals, secret_ref, initiator_name;
        iscsi_interface, fs_type, read_only, chap_auth_discovery, chap_auth_session }
    GlusterfsVolumeSource { endpoints, path; read_only }
    PersistentVolumeClaimVolumeSource { claim_name; read_only }
    RbdVolumeSource { monitors, image, secret_ref; fs_type, pool, user, keyring, read_only }
    FlexVolumeSource { driver, secret_ref, options; fs_type, read_only }
    CinderVolumeSource { volume_id = "volumeID", secret_ref; fs_type, read_only }
    CephFsVolumeSource { monitors, secret_ref; path, user, secret_file, read_only }
    FlockerVolumeSource { ; dataset_name, dataset_uuid = "datasetUUID" }
    DownwardAPIVolumeSource { items, default_mode }
    DownwardAPIVolumeFile { path, field_ref, resource_field_ref, mode }
    ObjectFieldSelector { field_path; api_version }
    ResourceFieldSelector { resource, divisor; container_name }
    FcVolumeSource { target_ww_ns = "targetWWNs", lun, wwids; fs_type, read_only }
    AzureFileVolumeSource { secret_name, share_name; read_only }
    ConfigMapVolumeSource { items, default_mode, optional; ; local_object_reference }
    VsphereVirtualDiskVolumeSource { volume_path; fs_type, storage_policy_name,
        storage_policy_id = "storagePolicyID" }
    QuobyteVolumeSource { registry, volume; read_only, user, group, tenant }
    AzureDiskVolumeSource { disk_name, disk_uri = "diskURI", caching_mode, fs_type, read_only,
        kind }
    PhotonPersistentDiskVolumeSource { pd_id = "pdID"; fs_type }
    ProjectedVolumeSource { sources, default_mode }
    VolumeProjection { secret, downward_api = "downwardAPI", config_map, service_account_token,
        cluster_trust_bundle, pod_certificate }
    SecretProjection { items, optional; ; local_object_reference }
    DownwardAPIProjection { items }
    ConfigMapProjection { items, optional; ; local_object_reference }
    ServiceAccountTokenProjection { expiration_seconds, path; audience }
    ClusterTrustBundleProjection { name, signer_name, label_selector, optional, path }
    PodCertificateProjection { max_expiration_seconds, user_annotations; signer_name, key_type,
        credential_bundle_path, key_path, certificate_chain_path }
    PortworxVolumeSource { volume_id = "volumeID"; fs_type, read_only }
    ScaleIoVolumeSource { gateway, system, secret_ref; ssl_enabled, protection_domain,
        storage_pool, storage_mode, volume_name, fs_type, read_only }
    StorageOsVolumeSource { secret_ref; volume_name, volume_namespace, fs_type, read_only }
    CSIVolumeSource { driver, read_only, fs_type, volume_attributes, node_publish_secret_ref }
    EphemeralVolumeSource { volume_claim_template }
    PersistentVolumeClaimTemplate { metadata, spec }
    PersistentVolumeClaimSpec { access_modes, selector, resources, storage_class_name,
        volume_mode, data_source, data_source_ref, volume_attributes_class_name; volume_name }
    VolumeResourceRequirements { limits, requests }
    TypedLocalObjectReference { api_group, kind, name }
    TypedObjectReference { api_group, kind, name, namespace }
    ImageVolumeSource { ; reference, pull_policy }
    Container { name, command, args, ports, env_from, env, resources, resize_policy,
        restart_policy, restart_policy_rules, volume_mounts, volume_devices, liveness_probe,
        readiness_probe, startup_probe, lifecycle, security_context; image, working_dir,
        termination_message_path, termination_message_policy, image_pull_policy, stdin,
        stdin_once, tty }
    ContainerPort { container_port; name, host_port, protocol, host_ip = "hostIP" }
    EnvFromSource { config_map_ref, secret_ref; prefix }
    ConfigMapEnvSource { optional; ; local_object_reference }
    SecretEnvSource { optional; ; local_object_reference }
    EnvVar { name, value_from; value }
    EnvVarSource { field_ref, resource_field_ref, config_map_key_ref, secret_key_ref,
        file_key_ref }
    ConfigMapKeySelector { key, optional; ; local_object_reference }
    SecretKeySelector { key, optional; ; local_object_reference }
    FileKeySelector { volume_name, path, key, optional }
    ResourceRequirements { limits, requests, claims }
    ResourceClaim { name; request }
    ContainerResizePolicy { resource_name, restart_policy }
    ContainerRestartRule { exit_codes; action }
    ContainerRestartRuleOnExitCodes { values; operator }
    VolumeMount { name, recursive_read_only, mount_path, mount_propagation; read_only, sub_path,
        sub_path_expr }
    VolumeDevice { name, device_path }
    Probe { termination_grace_period_seconds; initial_delay_seconds, timeout_seconds,
        period_seconds, success_threshold, failure_threshold; handler }
    ProbeHandler { exec, http_get, tcp_socket, grpc }
    ExecAction { command }
    HttpGetAction { port, http_headers; path, host, scheme }
    HttpHeader { name, value }
    TcpSocketAction { port; host }
    GrpcAction { port, service }
    Lifecycle { post_start, pre_stop, stop_signal }
    LifecycleHandler { exec, http_get, tcp_socket, sleep }
    SleepAction { seconds }
    SecurityContext { capabilities, privileged, se_linux_options, windows_options, run_as_user,
        run_as_group, run_as_non_root, read_only_root_filesystem, allow_privilege_escalation,
        proc_mount, seccomp_profile, app_armor_profile }
    Capabilities { add, drop }
    SeLinuxOptions { ; user, role, r#type, level }
    WindowsSecurityContextOptions { gmsa_credential_spec_name, gmsa_credential_spec,
        run_as_user_name, host_process }
    SeccompProfile { r#type, localhost_profile }
    AppArmorProfile { r#type, localhost_profile }
    EphemeralContainer { ; target_container_name; ephemeral_container_common }
    EphemeralContainerCommon { name, command, args, ports, env_from, env, resources,
        resize_policy, restart_policy, restart_policy_rules, volume_mounts, volume_devices,
        liveness_probe, readiness_probe, startup_probe, lifecycle, security_context; image,
        working_dir, termination_message_path, termination_message_policy, image_pull_policy,
        stdin, stdin_once, tty }
    PodSecurityContext { se_linux_options, windows_options, run_as_user, run_as_group,
        run_as_non_root, supplemental_groups, supplemental_groups_policy, fs_group, sysctls,
        fs_group_change_policy, seccomp_profile, app_armor_profile, se_linux_change_policy }
    Sysctl { name, value }
    Affinity { node_affinity, pod_affinity, pod_anti_affinity }
    NodeAffinity { required_during_scheduling_ignored_during_execution,
        preferred_during_scheduling_ignored_during_execution }
    NodeSelector { node_selector_terms }
    NodeSelectorTerm { match_expressions, match_fields }
    NodeSelectorRequirement { key, operator, values }
    PreferredSchedulingTerm { weight, preference }
    PodAffinity { required_during_scheduling_ignored_during_execution,
        preferred_during_scheduling_ignored_during_execution }
    PodAffinityTerm { label_selector, namespaces, topology_key, namespace_selector,
        match_label_keys, mismatch_label_keys }
    WeightedPodAffinityTerm { weight, pod_affinity_term }
    PodAntiAffinity { required_during_scheduling_ignored_during_execution,
        preferred_during_scheduling_ignored_during_execution }
    Toleration { toleration_seconds; key, operator, value, effect }
    HostAlias { ip, hostnames }
    PodDnsConfig { nameservers, searches, options }
    PodDnsConfigOption { value; name }
    PodReadinessGate { condition_type }
    TopologySpreadConstraint { max_skew, topology_key, when_unsatisfiable, label_selector,
        min_domains, node_affinity_policy, node_taints_policy, match_label_keys }
    PodOs { name }
    PodSchedulingGate { name }
    PodResourceClaim { name, resource_claim_name, resource_claim_template_name }
    WorkloadReference { name, pod_group, pod_group_replica_key }
    PodStatus { conditions, host_ips = "hostIPs", pod_ips = "podIPs", start_time,
        init_container_statuses, container_statuses, ephemeral_container_statuses,
        resource_claim_statuses, extended_resource_claim_status, allocated_resources, resources;
        observed_generation, phase, message, reason, nominated_node_name, host_ip = "hostIP",
        pod_ip = "podIP", qos_class, resize }
    PodCondition { r#type, status, last_probe_time, last_transition_time; observed_generation,
        reason, message }
    HostIp { ip }
    PodIp { ip }
    ContainerStatus { name, state, last_state, ready, restart_count, image, image_id =
        "imageID", started, allocated_resources, resources, volume_mounts, user,
        allocated_resources_status, stop_signal; container_id = "containerID" }
    ContainerState { waiting, running, terminated }
    ContainerStateWaiting { ; reason, message }
    ContainerStateRunning { started_at }
    ContainerStateTerminated { exit_code, started_at, finished_at; signal, reason, message,
        container_id = "containerID" }
    VolumeMountStatus { name, mount_path, recursive_read_only; read_only }
    ContainerUser { linux }
    LinuxContainerUser { uid, gid, supplemental_groups }
    ResourceStatus { name, resources }
    ResourceHealth { resource_id = "resourceID"; health }
    PodResourceClaimStatus { name, resource_claim_name }
    PodExtendedResourceClaimStatus { request_mappings, resource_claim_name }
    ContainerExtendedResourceRequest { container_name, resource_name, request_name }
    ResourceQuota { metadata, spec, status }
    ResourceQuotaSpec { hard, scopes, scope_selector }
    ScopeSelector { match_expressions }
    ScopedResourceSelectorRequirement { scope_name, operator, values }
    ResourceQuotaStatus { hard, used }
    LimitRange { metadata, spec }
    LimitRangeSpec { limits }
    LimitRangeItem { r#type, max, min, default, default_request, max_limit_request_ratio }
    PersistentVolumeClaim { metadata, spec, status }
    PersistentVolumeClaimStatus { access_modes, capacity, conditions, allocated_resources,
        allocated_resource_statuses, current_volume_attributes_class_name, modify_volume_status;
        phase }
    PersistentVolumeClaimCondition { r#type, status, last_probe_time, last_transition_time;
        reason, message }
    ModifyVolumeStatus { status; target_volume_attributes_class_name }
    ReplicationController { metadata, spec, status }
    ReplicationControllerSpec { replicas, selector, template; min_ready_seconds }
    PodTemplateSpec { metadata, spec }
    ReplicationControllerStatus { replicas, conditions; fully_labeled_replicas, ready_replicas,
        available_replicas, observed_generation }
    ReplicationControllerCondition { r#type, status, last_transition_time; reason, message }
    PodTemplate { metadata, template }
    Endpoints { metadata, subsets }
    EndpointSubset { addresses, not_ready_addresses, ports }
    EndpointAddress { ip, node_name, target_ref; hostname }
    EndpointPort { port, app_protocol; name, protocol }
}
