//! The TLS settings (`tls-*`), as CONFIG GET shows them and the server's
//! TLS context reads them when it (re)loads certificates. Kept together so
//! that CONFIG SET can restore them all when a new set does not load.

use std::path::PathBuf;

/// `tls-auth-clients`: whether a client must present a certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AuthClients {
    /// Refused without a certificate the CA signed (Redis's default).
    #[default]
    Yes,
    No,
    /// A certificate is checked when given; none is accepted too.
    Optional,
}

impl AuthClients {
    pub fn parse(v: &[u8]) -> Option<AuthClients> {
        match v.to_ascii_lowercase().as_slice() {
            b"yes" => Some(AuthClients::Yes),
            b"no" => Some(AuthClients::No),
            b"optional" => Some(AuthClients::Optional),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            AuthClients::Yes => "yes",
            AuthClients::No => "no",
            AuthClients::Optional => "optional",
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct TlsSettings {
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// Passphrase of an encrypted (PKCS#8) key file.
    pub key_file_pass: Option<String>,
    /// What the node presents on its links to other nodes (tls-cluster);
    /// None: the server's certificate and key.
    pub client_cert_file: Option<PathBuf>,
    pub client_key_file: Option<PathBuf>,
    pub client_key_file_pass: Option<String>,
    pub ca_cert_file: Option<PathBuf>,
    pub ca_cert_dir: Option<PathBuf>,
    pub auth_clients: AuthClients,
    /// `tls-protocols`, e.g. "TLSv1.2 TLSv1.3"; empty = both.
    pub protocols: String,
    /// `tls-ciphers` (TLS 1.2, OpenSSL or IANA names) and
    /// `tls-ciphersuites` (TLS 1.3); empty = every suite.
    pub ciphers: String,
    pub ciphersuites: String,
    pub prefer_server_ciphers: bool,
    pub session_caching: bool,
    pub session_cache_size: usize,
    pub session_cache_timeout_secs: u64,
}

/// A path setting: empty text clears it.
pub fn path(text: String) -> Option<PathBuf> {
    (!text.is_empty()).then(|| PathBuf::from(text))
}

/// A path setting as CONFIG GET shows it.
pub fn show(p: &Option<PathBuf>) -> String {
    p.as_ref().map(|p| p.display().to_string()).unwrap_or_default()
}
