//! TLS (`spec.tls`): where the node finds its certificate, and the cert-manager Certificate the
//! operator asks for when `certManager` is set (a dynamic object: cert-manager may not be
//! installed, and the operator does not depend on its Rust types). In cluster mode the same
//! certificate also guards the admin port, between nodes and from the operator.

use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::json;

use super::{Owner, SpecError, headless_service_name};
use crate::api::{CacheCluster, ClientAuth, TlsSpec};

/// Where the certificate Secret is mounted in the node's container. A Secret volume (never a
/// subPath) gets a renewed certificate within the kubelet's sync period, and the node reloads
/// it from there without a restart.
pub(crate) const TLS_DIR: &str = "/etc/strata-tls";

/// `cert-manager.io/v1` `Certificate` (plural `certificates`).
pub fn certificate_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("cert-manager.io", "v1", "Certificate");
    ApiResource::from_gvk_with_plural(&gvk, "certificates")
}

/// The cert-manager Certificate the operator makes for `name` (`<name>-tls`).
pub fn certificate_name(name: &str) -> String {
    format!("{name}-tls")
}

/// The Secret holding the node's certificate: the one named, or `<name>-tls` from cert-manager.
pub fn secret_name(tls: &TlsSpec, name: &str) -> String {
    tls.secret_name.clone().unwrap_or_else(|| format!("{name}-tls"))
}

/// The node's `tls-*` settings beside its `port`/`tls-port` (which `node_config` picks: TLS only,
/// or TLS beside the plain port with `allowPlaintext`): the Secret's files, and client certificates checked against its `ca.crt` when asked for. In cluster mode
/// the admin port speaks TLS too (`tls-cluster`): a node's links check the peer node's
/// certificate against `ca.crt` (and present the node's own, which the peer checks only when
/// `clientAuth` asks for client certificates), so the CA file is always set there.
pub(crate) fn node_settings(tls: &TlsSpec, cluster: bool) -> Vec<(&'static str, String)> {
    let mut lines =
        vec![("tls-cert-file", format!("{TLS_DIR}/tls.crt")), ("tls-key-file", format!("{TLS_DIR}/tls.key"))];
    let auth = match tls.client_auth {
        ClientAuth::None => "no",
        ClientAuth::Optional => "optional",
        ClientAuth::Required => "yes",
    };
    lines.push(("tls-auth-clients", auth.to_owned()));
    if tls.client_auth != ClientAuth::None || cluster {
        lines.push(("tls-ca-cert-file", format!("{TLS_DIR}/ca.crt")));
    }
    if cluster {
        lines.push(("tls-cluster", "yes".to_owned()));
    }
    lines
}

/// `<name>-tls`: a Certificate for every name a client may reach a node by: the client
/// Service, the headless Service and each pod behind it (where MOVED sends cluster-aware
/// clients), short and fully qualified.
pub(super) fn certificate(cc: &CacheCluster, owner: &Owner) -> Result<Option<DynamicObject>, SpecError> {
    let Some(tls) = &cc.spec.tls else { return Ok(None) };
    let Some(cm) = &tls.cert_manager else { return Ok(None) };
    if cm.issuer_ref.name.is_empty() {
        return Err(SpecError::new("tls.certManager.issuerRef.name", "must name an Issuer or ClusterIssuer"));
    }
    if !matches!(cm.issuer_ref.kind.as_str(), "Issuer" | "ClusterIssuer") && cm.issuer_ref.group == "cert-manager.io" {
        return Err(SpecError::new("tls.certManager.issuerRef.kind", "must be Issuer or ClusterIssuer"));
    }
    let (name, ns) = (&owner.name, &owner.namespace);
    let headless = headless_service_name(name);
    let mut dns = Vec::new();
    for domain in ["svc", "svc.cluster.local"] {
        dns.push(format!("{name}.{ns}.{domain}"));
        dns.push(format!("*.{headless}.{ns}.{domain}"));
    }
    dns.extend([name.clone(), format!("{name}.{ns}"), "localhost".to_owned()]);
    let certificate_name = certificate_name(name);
    let mut spec = json!({
        // No commonName (cert-manager limits it to 64 bytes, which long names pass): the
        // DNS names are what clients check.
        "secretName": secret_name(tls, name),
        "dnsNames": dns,
        "ipAddresses": ["127.0.0.1"],
        // Client auth too: in cluster mode nodes present it to each other's admin port.
        "usages": ["server auth", "client auth", "digital signature", "key encipherment"],
        "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
        "issuerRef": {"name": cm.issuer_ref.name, "kind": cm.issuer_ref.kind, "group": cm.issuer_ref.group},
    });
    if let Some(d) = &cm.duration {
        spec["duration"] = json!(d);
    }
    if let Some(r) = &cm.renew_before {
        spec["renewBefore"] = json!(r);
    }
    let resource = certificate_resource();
    Ok(Some(DynamicObject {
        metadata: owner.metadata(certificate_name.clone()),
        ..DynamicObject::new(&certificate_name, &resource).data(json!({ "spec": spec }))
    }))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resources::test_support::cluster;

    #[test]
    fn a_secret_name_is_used_as_given_and_cert_manager_gets_name_tls() {
        let cc = cluster(json!({"tls": {"secretName": "mine"}}));
        assert_eq!(secret_name(cc.spec.tls.as_ref().unwrap(), "cache"), "mine");
        assert!(certificate(&cc, &Owner::of(&cc).unwrap()).unwrap().is_none());
        let cc = cluster(json!({"tls": {"certManager": {"issuerRef": {"name": "ca"}}}}));
        assert_eq!(secret_name(cc.spec.tls.as_ref().unwrap(), "cache"), "cache-tls");
    }

    #[test]
    fn the_certificate_names_the_services_and_every_pod() {
        let cc = cluster(json!({"tls": {"certManager": {
            "issuerRef": {"name": "ca", "kind": "ClusterIssuer"}, "duration": "720h", "renewBefore": "240h"
        }}}));
        let cert = certificate(&cc, &Owner::of(&cc).unwrap()).unwrap().unwrap();
        assert_eq!(cert.metadata.name.as_deref(), Some("cache-tls"));
        let spec = &cert.data["spec"];
        assert_eq!(spec["secretName"], "cache-tls");
        let dns: Vec<&str> = spec["dnsNames"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        assert!(dns.contains(&"cache.shop.svc") && dns.contains(&"*.cache-headless.shop.svc.cluster.local"), "{dns:?}");
        assert_eq!(spec["issuerRef"], json!({"name": "ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}));
        assert_eq!((spec["duration"].as_str(), spec["renewBefore"].as_str()), (Some("720h"), Some("240h")));
        assert_eq!(spec["usages"], json!(["server auth", "client auth", "digital signature", "key encipherment"]));
        let bad = cluster(json!({"tls": {"certManager": {"issuerRef": {"name": "ca", "kind": "Bogus"}}}}));
        assert_eq!(certificate(&bad, &Owner::of(&bad).unwrap()).unwrap_err().field, "tls.certManager.issuerRef.kind");
    }

    #[test]
    fn client_auth_decides_the_ca_file() {
        let settings = |auth: &str| {
            let cc = cluster(json!({"tls": {"secretName": "s", "clientAuth": auth}}));
            node_settings(cc.spec.tls.as_ref().unwrap(), false)
        };
        let none = settings("None");
        assert!(none.contains(&("tls-auth-clients", "no".into())));
        assert!(none.iter().all(|(k, _)| *k != "tls-ca-cert-file"));
        let required = settings("Required");
        assert!(required.contains(&("tls-auth-clients", "yes".into())));
        assert!(required.contains(&("tls-ca-cert-file", "/etc/strata-tls/ca.crt".into())));
        assert!(settings("Optional").contains(&("tls-auth-clients", "optional".into())));
        assert!(required.iter().all(|(k, _)| *k != "tls-cluster"), "no tls-cluster outside cluster mode");
    }

    #[test]
    fn cluster_mode_checks_nodes_against_the_ca_whatever_client_auth_says() {
        let cc = cluster(json!({"tls": {"secretName": "s"}}));
        let settings = node_settings(cc.spec.tls.as_ref().unwrap(), true);
        assert!(settings.contains(&("tls-cluster", "yes".into())), "{settings:?}");
        assert!(settings.contains(&("tls-auth-clients", "no".into())), "{settings:?}");
        assert!(settings.contains(&("tls-ca-cert-file", "/etc/strata-tls/ca.crt".into())), "{settings:?}");
        let ca_lines = settings.iter().filter(|(k, _)| *k == "tls-ca-cert-file").count();
        let cc = cluster(json!({"tls": {"secretName": "s", "clientAuth": "Required"}}));
        let required = node_settings(cc.spec.tls.as_ref().unwrap(), true);
        assert_eq!((ca_lines, required.iter().filter(|(k, _)| *k == "tls-ca-cert-file").count()), (1, 1));
    }
}
