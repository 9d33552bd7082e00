//! The headless Service (per-pod DNS, metrics scraping) and the client Service (the endpoint).

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec as KubeServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::node_config::{ADMIN_PORT, DIRECT_PORT, METRICS_PORT, REDIS_PORT, TLS_PORT};
use super::statefulset::{ADMIN_PORT_NAME, DIRECT_PORT_NAME, TLS_PORT_NAME};
use super::{Owner, SERVICE_ROLE_LABEL, SpecError, headless_service_name, selector_labels};
use crate::api::{CacheCluster, CacheClusterSpec, DEFAULT_TLS_PORT, ServiceType};

/// `<name>-headless`: one DNS record per pod, ready or not, so peers and Prometheus find every
/// node, including one still recovering its data.
pub(super) fn headless_service(cc: &CacheCluster, owner: &Owner) -> Service {
    let mut metadata = owner.metadata(headless_service_name(&owner.name));
    metadata.labels.get_or_insert_default().insert(SERVICE_ROLE_LABEL.to_owned(), "headless".to_owned());
    Service {
        metadata,
        spec: Some(KubeServiceSpec {
            cluster_ip: Some("None".to_owned()),
            publish_not_ready_addresses: Some(true),
            selector: Some(selector_labels(&owner.name)),
            ports: Some(headless_ports(cc)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn headless_ports(cc: &CacheCluster) -> Vec<ServicePort> {
    let mut ports = vec![port("redis", REDIS_PORT)];
    if cc.spec.tls.as_ref().is_some_and(|tls| tls.allow_plaintext) {
        ports.push(port(TLS_PORT_NAME, TLS_PORT));
    }
    ports.push(port("metrics", METRICS_PORT));
    if cc.spec.cluster.enabled {
        ports.push(port(DIRECT_PORT_NAME, DIRECT_PORT));
        ports.push(port(ADMIN_PORT_NAME, ADMIN_PORT));
    }
    ports
}

/// `<name>`: the Redis endpoint, `spec.service.port` forwarded to the pods' redis port; with
/// `spec.tls.allowPlaintext`, `spec.tls.port` to the pods' TLS port beside it; and in cluster
/// mode the `cluster` port (6380) for cluster-aware clients, which MOVED then sends to each pod
/// directly.
pub(super) fn client_service(cc: &CacheCluster, owner: &Owner) -> Result<Service, SpecError> {
    let service = &cc.spec.service;
    if !(1..=65535).contains(&service.port) {
        return Err(SpecError::new("service.port", format!("{} is not a port: use 1 to 65535", service.port)));
    }
    let tls_port = tls_service_port(&cc.spec)?;
    let mut metadata = owner.metadata(owner.name.clone());
    metadata.labels.get_or_insert_default().insert(SERVICE_ROLE_LABEL.to_owned(), "client".to_owned());
    metadata.annotations = Some(service.annotations.clone()).filter(|a| !a.is_empty());
    let type_ = match service.type_ {
        ServiceType::ClusterIp => "ClusterIP",
        ServiceType::NodePort => "NodePort",
        ServiceType::LoadBalancer => "LoadBalancer",
    };
    let mut ports = vec![ServicePort { app_protocol: Some("redis".to_owned()), ..port("redis", service.port) }];
    if let Some(tls_port) = tls_port {
        // No appProtocol: a mesh that reads `redis` expects plain text there.
        ports.push(ServicePort { port: tls_port, ..port(TLS_PORT_NAME, TLS_PORT) });
    }
    if cc.spec.cluster.enabled && service.port != DIRECT_PORT {
        ports.push(ServicePort { app_protocol: Some("redis".to_owned()), ..port(DIRECT_PORT_NAME, DIRECT_PORT) });
    }
    Ok(Service {
        metadata,
        spec: Some(KubeServiceSpec {
            type_: Some(type_.to_owned()),
            selector: Some(selector_labels(&owner.name)),
            ports: Some(ports),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// The client Service's TLS port beside the plain one (`spec.tls.port` with `allowPlaintext`),
/// after the checks the CRD's rules make: a port, only with `allowPlaintext`, and apart from
/// the Service's other ports.
fn tls_service_port(spec: &CacheClusterSpec) -> Result<Option<i32>, SpecError> {
    let Some(tls) = &spec.tls else { return Ok(None) };
    if let Some(port) = tls.port {
        if !tls.allow_plaintext {
            return Err(SpecError::new(
                "tls.port",
                "is the TLS port beside the plain one and needs tls.allowPlaintext: true; for TLS only, remove \
                 tls.port (TLS is then served on service.port)",
            ));
        }
        if !(1..=65535).contains(&port) {
            return Err(SpecError::new("tls.port", format!("{port} is not a port: use 1 to 65535")));
        }
    }
    let Some(port) = tls.side_port() else { return Ok(None) };
    let set = if tls.port.is_some() { "" } else { " (the default)" };
    if port == spec.service.port {
        return Err(SpecError::new(
            "tls.port",
            format!(
                "{port}{set} is also service.port: the Service's TLS port must differ from its plain one; set \
                 tls.port to another port (default {DEFAULT_TLS_PORT})"
            ),
        ));
    }
    if spec.cluster.enabled && port == DIRECT_PORT {
        return Err(SpecError::new(
            "tls.port",
            format!(
                "{port}{set} is the Service's cluster port in cluster mode (where MOVED sends cluster-aware \
                 clients): set tls.port to another port (default {DEFAULT_TLS_PORT})"
            ),
        ));
    }
    Ok(Some(port))
}

/// A TCP port forwarded to the container port of the same name.
fn port(name: &str, port: i32) -> ServicePort {
    ServicePort {
        name: Some(name.to_owned()),
        port,
        target_port: Some(IntOrString::String(name.to_owned())),
        protocol: Some("TCP".to_owned()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::resources::test_support::{NAME, cluster};

    fn client(spec: Value) -> Result<Service, SpecError> {
        let cc = cluster(spec);
        client_service(&cc, &Owner::of(&cc).unwrap())
    }

    #[test]
    fn headless_service_lists_every_pod_on_every_port() {
        let cc = cluster(json!({}));
        let service = headless_service(&cc, &Owner::of(&cc).unwrap());
        assert_eq!(service.metadata.name.as_deref(), Some("cache-headless"));
        assert_eq!(service.metadata.labels.unwrap()[SERVICE_ROLE_LABEL], "headless");
        let spec = service.spec.unwrap();
        assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
        assert_eq!(spec.publish_not_ready_addresses, Some(true));
        assert_eq!(spec.selector, Some(selector_labels(NAME)));
        let ports: Vec<_> =
            spec.ports.unwrap().into_iter().map(|p| (p.name.unwrap(), p.port, p.target_port.unwrap())).collect();
        assert_eq!(
            ports,
            [
                ("redis".to_owned(), 6379, IntOrString::String("redis".to_owned())),
                ("metrics".to_owned(), 9121, IntOrString::String("metrics".to_owned())),
                ("cluster".to_owned(), 6380, IntOrString::String("cluster".to_owned())),
                ("cluster-admin".to_owned(), 16379, IntOrString::String("cluster-admin".to_owned())),
            ]
        );
        // Independent caches have no cluster ports.
        let cc = cluster(json!({"cluster": {"enabled": false}}));
        let ports = headless_service(&cc, &Owner::of(&cc).unwrap()).spec.unwrap().ports.unwrap();
        assert_eq!(ports.iter().map(|p| p.name.as_deref().unwrap()).collect::<Vec<_>>(), ["redis", "metrics"]);
    }

    #[test]
    fn client_service_offers_the_cluster_port_in_cluster_mode_only() {
        let names = |spec: Value| -> Vec<(String, i32)> {
            client(spec).unwrap().spec.unwrap().ports.unwrap().into_iter().map(|p| (p.name.unwrap(), p.port)).collect()
        };
        assert_eq!(names(json!({})), [("redis".to_owned(), 6379), ("cluster".to_owned(), 6380)]);
        assert_eq!(names(json!({"cluster": {"enabled": false}})), [("redis".to_owned(), 6379)]);
        // A client port of 6380 would clash with the cluster port: the redis port wins.
        assert_eq!(names(json!({"service": {"port": 6380}})), [("redis".to_owned(), 6380)]);
    }

    fn ports(service: Service) -> Vec<(String, i32, IntOrString)> {
        service
            .spec
            .unwrap()
            .ports
            .unwrap()
            .into_iter()
            .map(|p| (p.name.unwrap(), p.port, p.target_port.unwrap()))
            .collect()
    }

    fn named(name: &str, port: i32) -> (String, i32, IntOrString) {
        (name.to_owned(), port, IntOrString::String(name.to_owned()))
    }

    #[test]
    fn tls_only_keeps_one_redis_port_and_allow_plaintext_adds_redis_tls() {
        // TLS only: the redis port itself speaks TLS; nothing more on either Service.
        let only = cluster(json!({"tls": {"secretName": "cert"}}));
        let owner = Owner::of(&only).unwrap();
        assert_eq!(ports(client_service(&only, &owner).unwrap()), [named("redis", 6379), named("cluster", 6380)]);
        assert!(!ports(headless_service(&only, &owner)).iter().any(|p| p.0 == "redis-tls"));
        // Both: plain on redis, TLS on redis-tls (default 6390, to the pods' 6390).
        let both = cluster(json!({"tls": {"secretName": "cert", "allowPlaintext": true}}));
        let owner = Owner::of(&both).unwrap();
        let service = client_service(&both, &owner).unwrap();
        let tls = service.spec.as_ref().unwrap().ports.as_ref().unwrap()[1].clone();
        assert_eq!(tls.app_protocol, None, "not plain Redis");
        assert_eq!(tls.protocol.as_deref(), Some("TCP"));
        assert_eq!(ports(service), [named("redis", 6379), named("redis-tls", 6390), named("cluster", 6380)]);
        assert_eq!(
            ports(headless_service(&both, &owner)),
            [
                named("redis", 6379),
                named("redis-tls", 6390),
                named("metrics", 9121),
                named("cluster", 6380),
                named("cluster-admin", 16379)
            ]
        );
        // tls.port and service.port choose the Service's ports; the pods' stay put.
        let spec = json!({"service": {"port": 7000}, "tls": {"secretName": "c", "allowPlaintext": true, "port": 7001},
                          "cluster": {"enabled": false}});
        assert_eq!(
            ports(client(spec).unwrap()),
            [
                ("redis".to_owned(), 7000, IntOrString::String("redis".to_owned())),
                ("redis-tls".to_owned(), 7001, IntOrString::String("redis-tls".to_owned())),
            ]
        );
    }

    #[test]
    fn the_tls_port_needs_allow_plaintext_and_its_own_number() {
        let error = |spec: Value| client(spec).unwrap_err();
        // Without allowPlaintext, tls.port would be ignored: refused, as the CRD's rule does.
        let err = error(json!({"tls": {"secretName": "c", "port": 6390}}));
        assert_eq!(err.field, "tls.port");
        assert!(err.message.contains("needs tls.allowPlaintext: true"), "{err}");
        for port in [0, 65536] {
            assert_eq!(
                error(json!({"tls": {"secretName": "c", "allowPlaintext": true, "port": port}})).field,
                "tls.port"
            );
        }
        // The default TLS port against a service.port of 6390.
        let err = error(json!({"service": {"port": 6390}, "tls": {"secretName": "c", "allowPlaintext": true}}));
        assert_eq!(err.field, "tls.port");
        assert!(err.message.starts_with("6390 (the default) is also service.port"), "{err}");
        assert_eq!(err.to_string().split(':').next(), Some("spec.tls.port"));
        let err =
            error(json!({"service": {"port": 7000}, "tls": {"secretName": "c", "allowPlaintext": true, "port": 7000}}));
        assert!(err.message.starts_with("7000 is also service.port"), "{err}");
        // The cluster port, in cluster mode only.
        let err = error(json!({"tls": {"secretName": "c", "allowPlaintext": true, "port": 6380}}));
        assert!(err.message.contains("cluster port"), "{err}");
        let independent =
            json!({"tls": {"secretName": "c", "allowPlaintext": true, "port": 6380}, "cluster": {"enabled": false}});
        assert!(client(independent).is_ok());
        // TLS only on 6390 is fine: there is no second port.
        assert!(client(json!({"service": {"port": 6390}, "tls": {"secretName": "c"}})).is_ok());
    }

    #[test]
    fn client_service_defaults_to_cluster_ip_on_6379() {
        let service = client(json!({})).unwrap();
        assert_eq!(service.metadata.name.as_deref(), Some(NAME));
        assert_eq!(service.metadata.labels.unwrap()[SERVICE_ROLE_LABEL], "client");
        assert_eq!(service.metadata.annotations, None);
        let spec = service.spec.unwrap();
        assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
        assert_eq!(spec.selector, Some(selector_labels(NAME)));
        assert_eq!(spec.cluster_ip, None, "allocated by the API server");
        let ports = spec.ports.unwrap();
        assert_eq!(ports.len(), 2, "redis, and cluster for cluster-aware clients");
        assert_eq!(ports[0].name.as_deref(), Some("redis"));
        assert_eq!(ports[0].port, 6379);
        assert_eq!(ports[0].target_port, Some(IntOrString::String("redis".to_owned())));
        assert_eq!(ports[0].app_protocol.as_deref(), Some("redis"));
        assert_eq!(ports[0].protocol.as_deref(), Some("TCP"));
    }

    #[test]
    fn client_service_takes_type_port_and_annotations_from_the_spec() {
        let annotations = json!({"service.beta.kubernetes.io/aws-load-balancer-internal": "true"});
        let service =
            client(json!({"service": {"type": "LoadBalancer", "port": 6380, "annotations": annotations}})).unwrap();
        assert_eq!(serde_json::to_value(service.metadata.annotations).unwrap(), annotations);
        let spec = service.spec.unwrap();
        assert_eq!(spec.type_.as_deref(), Some("LoadBalancer"));
        let port = &spec.ports.unwrap()[0];
        assert_eq!(port.port, 6380);
        // Whatever clients use, the pods listen on their redis port.
        assert_eq!(port.target_port, Some(IntOrString::String("redis".to_owned())));
        let node_port = client(json!({"service": {"type": "NodePort"}})).unwrap();
        assert_eq!(node_port.spec.unwrap().type_.as_deref(), Some("NodePort"));
    }

    #[test]
    fn client_port_is_checked() {
        for port in [0, -1, 65536] {
            assert_eq!(client(json!({"service": {"port": port}})).unwrap_err().field, "service.port", "{port}");
        }
        assert!(client(json!({"service": {"port": 65535}})).is_ok());
    }
}
