//! TLS for `tls-port`: loads the certificate, key and CA files into a rustls
//! server configuration, swaps in a new one when CONFIG SET changes a
//! `tls-*` setting or when the files change on disk (a Kubernetes Secret
//! update, a cert-manager renewal), and counts handshakes and connections.
//!
//! With `tls-cluster`, the same load builds the client side of the links to
//! other nodes (their certificates checked against the CA, the node's own
//! presented), and a reload swaps both.
//!
//! Connections already open keep the session they negotiated; only new
//! ones see a reloaded certificate, so nothing is dropped. The handshake and
//! the encryption run on the client's worker (`sys::socket`), with no
//! shared lock: a worker takes the current configuration (one read lock,
//! an `Arc` clone) once per accepted connection.

use crate::base::time::days_from_civil;
use crate::cluster::link::LinkTls;
use crate::config::tls::{AuthClients, TlsSettings};
use parking_lot::{Mutex, RwLock};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, ring as provider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{ServerConfig, StoresServerSessions, WebPkiClientVerifier};
use rustls::{
    ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme, SupportedCipherSuite, SupportedProtocolVersion,
};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime};

/// How often the certificate files are checked for changes. Kubernetes
/// updates a mounted Secret within about a minute; a few seconds more is
/// nothing next to that, and a stat of three files costs nothing.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(2);

/// The node's TLS state, shared by the acceptor, the workers, CONFIG SET,
/// INFO and `/metrics`.
pub struct TlsContext {
    current: RwLock<Arc<ServerConfig>>,
    /// One reload at a time (CONFIG SET, the watcher): the settings read,
    /// the files loaded and the stamps kept all belong to one reload.
    serial: Mutex<()>,
    /// What the loaded files looked like, to notice a change on disk.
    stamps: Mutex<Vec<(PathBuf, Option<FileStamp>)>>,
    /// Expiry of the node's certificate (unix seconds; 0 = unknown).
    pub not_after: AtomicI64,
    /// TLS clients connected now, and handshakes that failed (a client
    /// without the certificate asked for, a plain-text client on the port).
    pub connections: AtomicUsize,
    pub handshake_failures: AtomicU64,
    /// Successful and refused reloads (CONFIG SET or a change on disk).
    pub reloads: AtomicU64,
    pub reload_failures: AtomicU64,
    /// With `tls-cluster`: where the links to other nodes find their
    /// client configuration, replaced on every reload.
    links: Option<Arc<LinkTls>>,
}

impl TlsContext {
    /// Loads the files the settings name; Err says what is wrong with them.
    /// `links`: the cluster's links to other nodes, to speak TLS (`tls-cluster`).
    pub fn new(settings: &TlsSettings, links: Option<Arc<LinkTls>>) -> Result<TlsContext, String> {
        let loaded = load(settings, links.is_some())?;
        if let (Some(links), Some(client)) = (&links, &loaded.client) {
            links.set(client.clone());
        }
        Ok(TlsContext {
            current: RwLock::new(loaded.config),
            serial: Mutex::new(()),
            stamps: Mutex::new(loaded.stamps),
            not_after: AtomicI64::new(loaded.not_after),
            connections: AtomicUsize::new(0),
            handshake_failures: AtomicU64::new(0),
            reloads: AtomicU64::new(0),
            reload_failures: AtomicU64::new(0),
            links,
        })
    }

    /// A server session for a new connection, with the current certificate.
    pub fn session(&self) -> Result<rustls::ServerConnection, rustls::Error> {
        rustls::ServerConnection::new(self.current.read().clone())
    }

    /// Loads the settings `current` reads (under the reload lock) and, if
    /// they load, makes them the current ones.
    pub fn reload(&self, current: impl FnOnce() -> TlsSettings) -> Result<(), String> {
        let _one_at_a_time = self.serial.lock();
        self.reload_locked(&current())
    }

    fn reload_locked(&self, settings: &TlsSettings) -> Result<(), String> {
        match load(settings, self.links.is_some()) {
            Ok(loaded) => {
                *self.current.write() = loaded.config;
                if let (Some(links), Some(client)) = (&self.links, loaded.client) {
                    links.set(client);
                }
                *self.stamps.lock() = loaded.stamps;
                self.not_after.store(loaded.not_after, Relaxed);
                self.reloads.fetch_add(1, Relaxed);
                Ok(())
            }
            Err(e) => {
                self.reload_failures.fetch_add(1, Relaxed);
                Err(e)
            }
        }
    }

    /// Reloads when a file loaded last time has changed (or appeared, or
    /// gone); None when none has. A change that does not load is not
    /// retried until the files change again (no warning every interval).
    pub fn reload_if_changed(&self, current: impl FnOnce() -> TlsSettings) -> Option<Result<(), String>> {
        let _one_at_a_time = self.serial.lock();
        let now: Vec<_> = {
            let stamps = self.stamps.lock();
            if stamps.iter().all(|(path, stamp)| FileStamp::of(path) == *stamp) {
                return None;
            }
            stamps.iter().map(|(path, _)| (path.clone(), FileStamp::of(path))).collect()
        };
        let result = self.reload_locked(&current());
        if result.is_err() {
            *self.stamps.lock() = now;
        }
        Some(result)
    }
}

/// The identity of a file's contents as far as `stat` tells: a Secret
/// update swaps a symlink to a new file, cert-manager rewrites in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileStamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: Option<SystemTime>,
}

impl FileStamp {
    fn of(path: &Path) -> Option<FileStamp> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).ok()?;
        Some(FileStamp { dev: m.dev(), ino: m.ino(), len: m.len(), mtime: m.modified().ok() })
    }
}

struct Loaded {
    config: Arc<ServerConfig>,
    /// The links' side (`tls-cluster`).
    client: Option<Arc<ClientConfig>>,
    stamps: Vec<(PathBuf, Option<FileStamp>)>,
    not_after: i64,
}

/// Builds a server configuration from the settings' files and options,
/// and with `cluster` the client one of the links between nodes.
fn load(s: &TlsSettings, cluster: bool) -> Result<Loaded, String> {
    let (Some(cert_file), Some(key_file)) = (&s.cert_file, &s.key_file) else {
        return Err("TLS needs tls-cert-file and tls-key-file".into());
    };
    // Stamped before they are read: a file replaced while we read it then
    // shows as changed at the next check, and is loaded again.
    let mut watched = vec![cert_file.clone(), key_file.clone()];
    if s.auth_clients != AuthClients::No || cluster {
        watched.extend(s.ca_cert_file.iter().chain(&s.ca_cert_dir).cloned());
    }
    if cluster {
        watched.extend(s.client_cert_file.iter().chain(&s.client_key_file).cloned());
    }
    let stamps = watched.iter().map(|p| (p.clone(), FileStamp::of(p))).collect();
    let chain = load_chain(cert_file)?;
    let key = load_key(key_file, s.key_file_pass.as_deref())?;
    let provider = Arc::new(CryptoProvider {
        cipher_suites: cipher_suites(&s.ciphers, &s.ciphersuites)?,
        ..provider::default_provider()
    });
    let versions = protocol_versions(&s.protocols)?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("TLS protocols and ciphers do not match: {e}"))?;
    let builder = match s.auth_clients {
        AuthClients::No => builder.with_no_client_auth(),
        auth => {
            let roots = load_roots(s)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
            let verifier = if auth == AuthClients::Optional { verifier.allow_unauthenticated() } else { verifier };
            builder.with_client_cert_verifier(
                verifier.build().map_err(|e| format!("Failed to configure CA certificate(s): {e}"))?,
            )
        }
    };
    let not_after = not_after(&chain[0]).unwrap_or(0);
    let client = match cluster {
        true => Some(link_config(s, &provider, &versions, &chain, &key)?),
        false => None,
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| format!("Failed to load the private key or certificate: {e}"))?;
    config.ignore_client_order = s.prefer_server_ciphers;
    if s.session_caching {
        // As Redis: a size of 0 is no limit.
        let size = if s.session_cache_size == 0 { usize::MAX } else { s.session_cache_size };
        config.session_storage = Arc::new(SessionCache::new(size, Duration::from_secs(s.session_cache_timeout_secs)));
    } else {
        config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        config.send_tls13_tickets = 0;
    }
    Ok(Loaded { config: Arc::new(config), client, stamps, not_after })
}

/// The client side of the links between nodes (`tls-cluster`): peers are
/// checked against the CA, and the node presents `tls-client-cert-file`
/// or else its own certificate (a peer may ask for one: tls-auth-clients).
fn link_config(
    s: &TlsSettings,
    provider: &Arc<CryptoProvider>,
    versions: &[&'static SupportedProtocolVersion],
    chain: &[CertificateDer<'static>],
    key: &PrivateKeyDer<'static>,
) -> Result<Arc<ClientConfig>, String> {
    let roots = Arc::new(load_roots(s)?);
    let verifier = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
        .build()
        .map_err(|e| format!("Failed to configure CA certificate(s): {e}"))?;
    let (chain, key) = match (&s.client_cert_file, &s.client_key_file) {
        (Some(cert_file), Some(key_file)) => {
            (load_chain(cert_file)?, load_key(key_file, s.client_key_file_pass.as_deref())?)
        }
        (None, None) => (chain.to_vec(), key.clone_key()),
        _ => return Err("tls-client-cert-file and tls-client-key-file go together".into()),
    };
    let config = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(|e| format!("TLS protocols and ciphers do not match: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PeerByChain(verifier)))
        .with_client_auth_cert(chain, key)
        .map_err(|e| format!("Failed to load the client private key or certificate: {e}"))?;
    Ok(Arc::new(config))
}

/// Checks a peer node's certificate chain against the CA and nothing more:
/// as Redis's cluster bus, not its name (topologies name nodes by IP as
/// often as by host). The chain is checked before the name, so a name
/// mismatch is the only error let through.
#[derive(Debug)]
struct PeerByChain(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for PeerByChain {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use rustls::CertificateError::{NotValidForName, NotValidForNameContext};
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(NotValidForName | NotValidForNameContext { .. })) => {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

fn load_chain(cert_file: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let chain = CertificateDer::pem_file_iter(cert_file)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("Failed to load certificate: {}: {}", cert_file.display(), pem_error(e)))?;
    if chain.is_empty() {
        return Err(format!("Failed to load certificate: {}: no certificate in the file", cert_file.display()));
    }
    Ok(chain)
}

fn pem_error(e: rustls::pki_types::pem::Error) -> String {
    match e {
        rustls::pki_types::pem::Error::Io(e) => e.to_string(),
        other => format!("{other:?}"),
    }
}

/// A private key file: PKCS#8, PKCS#1 or SEC1 in PEM, or PKCS#8 encrypted
/// with `pass` (`tls-key-file-pass`, as `openssl genrsa -aes256` or
/// `openssl pkcs8 -topk8` write it).
fn load_key(path: &Path, pass: Option<&str>) -> Result<PrivateKeyDer<'static>, String> {
    let fail = |why: String| format!("Failed to load private key: {}: {why}", path.display());
    let text = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
    if let Some(block) = pem_block(&text, "ENCRYPTED PRIVATE KEY") {
        let Some(pass) = pass else {
            return Err(fail(
                "the key is encrypted: set tls-key-file-pass (tls-client-key-file-pass for \
                             tls-client-key-file) to its passphrase"
                    .into(),
            ));
        };
        let (_, der) = pkcs8::der::pem::decode_vec(block).map_err(|e| fail(format!("{e}")))?;
        let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice()).map_err(|e| fail(format!("{e}")))?;
        let plain =
            info.decrypt(pass).map_err(|e| fail(format!("cannot decrypt it with the passphrase given: {e}")))?;
        return Ok(PrivateKeyDer::Pkcs8(plain.as_bytes().to_vec().into()));
    }
    if text.windows(9).any(|w| w == b"ENCRYPTED") {
        // OpenSSL's older format (`Proc-Type: 4,ENCRYPTED`, MD5-derived keys).
        return Err(fail(
            "the key is encrypted in OpenSSL's traditional format, which this node does not read; convert it \
             with `openssl pkcs8 -topk8 -v2 aes-256-cbc -in KEY -out NEW_KEY` (keeping a passphrase for \
             tls-key-file-pass) or decrypt it with `openssl pkey -in KEY -out PLAIN_KEY`"
                .into(),
        ));
    }
    PrivateKeyDer::from_pem_slice(&text).map_err(|e| fail(pem_error(e)))
}

/// The PEM block labelled `label` in `text`, markers included.
fn pem_block<'a>(text: &'a [u8], label: &str) -> Option<&'a [u8]> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle);
    let start = find(text, begin.as_bytes())?;
    let stop = start + find(&text[start..], end.as_bytes())? + end.len();
    Some(&text[start..stop])
}

/// The CA certificates client certificates are checked against.
fn load_roots(s: &TlsSettings) -> Result<RootCertStore, String> {
    let mut files = Vec::new();
    if let Some(f) = &s.ca_cert_file {
        files.push(f.clone());
    }
    if let Some(dir) = &s.ca_cert_dir {
        let entries = std::fs::read_dir(dir)
            .map_err(|e| format!("Failed to configure CA certificate(s) directory: {}: {e}", dir.display()))?;
        let mut in_dir: Vec<PathBuf> =
            entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file()).collect();
        in_dir.sort();
        files.extend(in_dir);
    }
    if files.is_empty() {
        return Err("Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, \
                    tls-replication or tls-auth-clients are enabled!"
            .into());
    }
    let mut roots = RootCertStore::empty();
    for file in files {
        // A directory may hold other files (OpenSSL's hash links to the
        // same certificates, a README): those without certificates are skipped.
        let from_dir = s.ca_cert_file.as_ref() != Some(&file);
        let certs = CertificateDer::pem_file_iter(&file)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("Failed to load CA certificate(s): {}: {}", file.display(), pem_error(e)));
        let certs = match certs {
            Ok(c) => c,
            Err(_) if from_dir => continue,
            Err(e) => return Err(e),
        };
        if certs.is_empty() && !from_dir {
            return Err(format!("Failed to load CA certificate(s): {}: no certificate in the file", file.display()));
        }
        let (_, bad) = roots.add_parsable_certificates(certs);
        if bad > 0 && !from_dir {
            return Err(format!("Failed to load CA certificate(s): {}: {bad} unusable", file.display()));
        }
    }
    if roots.is_empty() {
        return Err("Failed to configure CA certificate(s): none found".into());
    }
    Ok(roots)
}

/// `tls-protocols`: Redis's names; rustls speaks TLS 1.2 and 1.3 only.
fn protocol_versions(text: &str) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    let mut versions = Vec::new();
    for word in text.split_whitespace() {
        let v = match word.to_ascii_lowercase().as_str() {
            "tlsv1.2" => &rustls::version::TLS12,
            "tlsv1.3" => &rustls::version::TLS13,
            "tlsv1" | "tlsv1.1" => {
                return Err(format!("{word} is not offered (it is insecure): use TLSv1.2 and/or TLSv1.3"));
            }
            _ => return Err(format!("Invalid tls-protocols specified: {word} (TLSv1.2, TLSv1.3)")),
        };
        if !versions.contains(&v) {
            versions.push(v);
        }
    }
    if versions.is_empty() {
        versions = vec![&rustls::version::TLS13, &rustls::version::TLS12];
    }
    Ok(versions)
}

/// The suites the node offers, with their OpenSSL and IANA names.
fn known_suites() -> [(&'static str, &'static str, SupportedCipherSuite); 9] {
    use provider::cipher_suite as cs;
    [
        ("TLS_AES_256_GCM_SHA384", "TLS_AES_256_GCM_SHA384", cs::TLS13_AES_256_GCM_SHA384),
        ("TLS_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256", cs::TLS13_AES_128_GCM_SHA256),
        ("TLS_CHACHA20_POLY1305_SHA256", "TLS_CHACHA20_POLY1305_SHA256", cs::TLS13_CHACHA20_POLY1305_SHA256),
        (
            "ECDHE-ECDSA-AES256-GCM-SHA384",
            "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        ),
        (
            "ECDHE-ECDSA-AES128-GCM-SHA256",
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        ),
        (
            "ECDHE-ECDSA-CHACHA20-POLY1305",
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
            cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        ),
        (
            "ECDHE-RSA-AES256-GCM-SHA384",
            "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
            cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        ),
        (
            "ECDHE-RSA-AES128-GCM-SHA256",
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        ),
        (
            "ECDHE-RSA-CHACHA20-POLY1305",
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
            cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        ),
    ]
}

/// `tls-ciphers` (TLS 1.2) and `tls-ciphersuites` (TLS 1.3), as OpenSSL
/// reads them: names it does not know are skipped, `!name`/`-name`
/// removes one, DEFAULT/HIGH/ALL mean every suite; an empty result is an
/// error. Order is kept (it matters with tls-prefer-server-ciphers).
fn cipher_suites(tls12: &str, tls13: &str) -> Result<Vec<SupportedCipherSuite>, String> {
    let pick = |text: &str, v13: bool, setting: &str| -> Result<Vec<SupportedCipherSuite>, String> {
        let family: Vec<_> =
            known_suites().into_iter().filter(|(_, _, s)| matches!(s, SupportedCipherSuite::Tls13(_)) == v13).collect();
        if text.trim().is_empty() {
            return Ok(family.iter().map(|f| f.2).collect());
        }
        let mut chosen: Vec<SupportedCipherSuite> = Vec::new();
        let named =
            |word: &str| family.iter().find(|(o, i, _)| o.eq_ignore_ascii_case(word) || i.eq_ignore_ascii_case(word));
        for word in text.split([':', ',', ' ']).filter(|w| !w.is_empty()) {
            if let Some(name) = word.strip_prefix(['!', '-']) {
                if let Some(f) = named(name) {
                    chosen.retain(|s| s.suite() != f.2.suite());
                }
            } else if ["DEFAULT", "HIGH", "ALL"].iter().any(|k| k.eq_ignore_ascii_case(word)) {
                for f in &family {
                    if !chosen.iter().any(|s| s.suite() == f.2.suite()) {
                        chosen.push(f.2);
                    }
                }
            } else if let Some(f) = named(word)
                && !chosen.iter().any(|s| s.suite() == f.2.suite())
            {
                chosen.push(f.2);
            }
        }
        if chosen.is_empty() {
            let names: Vec<&str> = family.iter().map(|f| f.0).collect();
            return Err(format!("{setting}: no cipher suite this node supports ({})", names.join(":")));
        }
        Ok(chosen)
    };
    let mut suites = pick(tls13, true, "tls-ciphersuites")?;
    suites.extend(pick(tls12, false, "tls-ciphers")?);
    Ok(suites)
}

/// A session cache for resumption with Redis's two knobs: how many
/// sessions (oldest dropped first) and for how long. Touched once per
/// handshake, never per request.
#[derive(Debug)]
struct SessionCache {
    inner: Mutex<SessionMap>,
    size: usize,
    timeout: Duration,
}

#[derive(Debug, Default)]
struct SessionMap {
    /// key -> (session, when stored, its number in `order`).
    map: HashMap<Vec<u8>, (Vec<u8>, Instant, u64)>,
    /// Keys oldest first, with their number: an entry whose number no
    /// longer matches the map's was taken or replaced, and is skipped.
    order: VecDeque<(Vec<u8>, u64)>,
    next: u64,
}

impl SessionCache {
    fn new(size: usize, timeout: Duration) -> SessionCache {
        SessionCache { inner: Mutex::new(SessionMap::default()), size, timeout }
    }
}

impl StoresServerSessions for SessionCache {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        let mut m = self.inner.lock();
        while m.map.len() >= self.size {
            let Some((old, n)) = m.order.pop_front() else { break };
            if m.map.get(&old).is_some_and(|e| e.2 == n) {
                m.map.remove(&old);
            }
        }
        let n = m.next;
        m.next += 1;
        m.map.insert(key.clone(), (value, Instant::now(), n));
        m.order.push_back((key, n));
        // Taken sessions leave stale keys behind: drop them before they outnumber the live ones.
        if m.order.len() > 2 * m.map.len() + 64 {
            let SessionMap { map, order, .. } = &mut *m;
            order.retain(|(k, n)| map.get(k).is_some_and(|e| e.2 == *n));
        }
        true
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        let m = self.inner.lock();
        m.map.get(key).filter(|(_, at, _)| at.elapsed() <= self.timeout).map(|(v, ..)| v.clone())
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        let (v, at, _) = self.inner.lock().map.remove(key)?;
        (at.elapsed() <= self.timeout).then_some(v)
    }

    fn can_cache(&self) -> bool {
        true
    }
}

/// The certificate's notAfter as unix seconds, read from its DER:
/// Certificate → tbsCertificate → validity → notAfter.
pub fn not_after(cert: &[u8]) -> Option<i64> {
    let (tag, cert, _) = der(cert)?;
    if tag != 0x30 {
        return None;
    }
    let (tag, mut tbs, _) = der(cert)?;
    if tag != 0x30 {
        return None;
    }
    // [0] version (optional), serialNumber, signature, issuer, validity.
    let mut field = 0;
    loop {
        let (tag, body, rest) = der(tbs)?;
        tbs = rest;
        if tag == 0xa0 {
            continue;
        }
        field += 1;
        if field == 4 {
            if tag != 0x30 {
                return None;
            }
            let (_, _, after) = der(body)?;
            let (tag, time, _) = der(after)?;
            return der_time(tag, time);
        }
    }
}

/// One DER element: (tag, contents, what follows).
fn der(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        (rest[..n].iter().fold(0usize, |acc, &b| acc << 8 | b as usize), &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// UTCTime (YYMMDDHHMMSSZ) or GeneralizedTime (YYYYMMDDHHMMSSZ) as unix seconds.
fn der_time(tag: u8, text: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(text).ok()?.strip_suffix('Z')?;
    let (year, rest) = match tag {
        0x17 if text.len() == 12 => {
            let yy: i64 = text[..2].parse().ok()?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &text[2..])
        }
        0x18 if text.len() == 14 => (text[..4].parse().ok()?, &text[4..]),
        _ => return None,
    };
    let num = |i: usize| rest.get(i..i + 2)?.parse::<i64>().ok();
    let (month, day, h, m, s) = (num(0)?, num(2)?, num(4)?, num(6)?, num(8)?);
    Some(days_from_civil(year, month, day)? * 86_400 + h * 3600 + m * 60 + s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificate_times_read_as_unix_seconds() {
        assert_eq!(der_time(0x17, b"491231235959Z"), Some(2_524_607_999));
        assert_eq!(der_time(0x18, b"20500101000000Z"), Some(2_524_608_000));
        assert_eq!(der_time(0x17, b"2501010000Z"), None);
    }

    #[test]
    fn cipher_lists_read_as_openssl_reads_them() {
        let names = |v: Vec<SupportedCipherSuite>| v.iter().map(|s| format!("{:?}", s.suite())).collect::<Vec<_>>();
        let all = cipher_suites("", "").unwrap();
        assert_eq!(all.len(), 9);
        let picked = names(cipher_suites("ECDHE-RSA-AES128-GCM-SHA256:NOSUCH", "TLS_AES_256_GCM_SHA384").unwrap());
        assert_eq!(picked, ["TLS13_AES_256_GCM_SHA384", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]);
        let without = cipher_suites("DEFAULT:!ECDHE-RSA-CHACHA20-POLY1305", "").unwrap();
        assert_eq!(without.len(), 8);
        assert!(cipher_suites("RC4-MD5", "").unwrap_err().contains("tls-ciphers"));
        assert!(protocol_versions("TLSv1.1").is_err());
        assert_eq!(protocol_versions("TLSv1.2").unwrap().len(), 1);
        assert_eq!(protocol_versions("").unwrap().len(), 2);
    }

    #[test]
    fn the_session_cache_forgets_the_oldest_and_the_expired() {
        let cache = SessionCache::new(2, Duration::from_secs(60));
        cache.put(b"a".to_vec(), b"1".to_vec());
        cache.put(b"b".to_vec(), b"2".to_vec());
        cache.put(b"c".to_vec(), b"3".to_vec());
        assert_eq!(cache.get(b"a"), None);
        assert_eq!(cache.get(b"c"), Some(b"3".to_vec()));
        assert_eq!(cache.take(b"b"), Some(b"2".to_vec()));
        assert_eq!(cache.get(b"b"), None);
        // Taking and storing many: the stale order entries are dropped.
        for i in 0..1000u32 {
            cache.put(i.to_be_bytes().to_vec(), b"v".to_vec());
            assert!(cache.take(&i.to_be_bytes()).is_some());
        }
        let m = cache.inner.lock();
        assert!(m.order.len() <= 2 * m.map.len() + 65, "{} keys in order", m.order.len());
        let expired = SessionCache::new(2, Duration::ZERO);
        expired.put(b"a".to_vec(), b"1".to_vec());
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(expired.get(b"a"), None);
    }
}
