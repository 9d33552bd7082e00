//! The push channel: a small client for a node's admin port (`STRATA.TOPOLOGY SET|GET`, `AUTH`).
//!
//! One short-lived connection per call: pushes are rare, and a fresh connection never carries
//! a stale AUTH state or a half-read reply from an earlier timeout. Only the RESP it needs is
//! here (bulk-string requests; simple, error, integer, bulk, array and null replies). A node
//! with `tls-cluster yes` speaks TLS there: the endpoint then carries a rustls client config.

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::{NodeId, Reported, Topology, TopologyError, TopologyNode};

/// How to reach one node's admin port.
#[derive(Clone, Debug)]
pub struct AdminEndpoint {
    /// `host:port` of the admin port.
    pub address: String,
    /// Sent with `AUTH <password>` first when set.
    pub password: Option<String>,
    /// Bound on connecting (the TLS handshake included) and on each request's round trip.
    pub timeout: Duration,
    /// TLS when set (the node runs `tls-cluster yes`); plain TCP otherwise.
    pub tls: Option<AdminTls>,
}

impl AdminEndpoint {
    pub fn new(address: impl Into<String>, password: Option<String>) -> Self {
        Self { address: address.into(), password, timeout: Duration::from_secs(3), tls: None }
    }

    pub fn with_tls(mut self, tls: AdminTls) -> Self {
        self.tls = Some(tls);
        self
    }
}

/// TLS to an admin port: whom to trust and what to present, and the name the node's
/// certificate must cover (the address is often an IP no certificate names).
#[derive(Clone, Debug)]
pub struct AdminTls {
    pub config: Arc<rustls::ClientConfig>,
    pub server_name: ServerName<'static>,
}

/// The client config for admin ports: the node's certificate is checked against `roots` (chain
/// and name, as any TLS client does), and `identity` (chain, key) is presented when the node
/// asks for a client certificate (`tls-auth-clients yes|optional`).
pub fn tls_config(
    roots: Vec<CertificateDer<'static>>,
    identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut store = rustls::RootCertStore::empty();
    for root in roots {
        store.add(root).map_err(|e| format!("a CA certificate is not usable: {e}"))?;
    }
    // ring explicitly: the process-wide default provider is not relied on.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(store);
    let config = match identity {
        Some((chain, key)) => builder
            .with_client_auth_cert(chain, key)
            .map_err(|e| format!("the certificate and key do not make a client identity: {e}"))?,
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// Every certificate of a PEM text (at least one).
pub fn pem_certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem).collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())?;
    if certs.is_empty() {
        return Err("no PEM certificate in it".to_owned());
    }
    Ok(certs)
}

/// The private key of a PEM text (PKCS#8, PKCS#1 or SEC1).
pub fn pem_private_key(pem: &[u8]) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => {
            "no PEM private key in it (an encrypted key is not read)".to_owned()
        }
        e => e.to_string(),
    })
}

/// Why a push or a read did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("{address}: {source}")]
    Io { address: String, source: std::io::Error },
    #[error("{address}: no answer within {timeout:?}")]
    Timeout { address: String, timeout: Duration },
    /// The TLS handshake failed: a certificate refused on either side.
    #[error("{address}: TLS: {source}")]
    Tls { address: String, source: rustls::Error },
    /// The node answered with an error (a stale epoch, an invalid topology, a wrong password).
    #[error("{address}: {message}")]
    Refused { address: String, message: String },
    #[error("{address}: unexpected reply: {what}")]
    Protocol { address: String, what: String },
}

/// A decoded RESP reply (only the types the admin port sends).
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Integer(i64),
    Bulk(Vec<u8>),
    Array(Vec<Reply>),
    Null,
}

/// Pushes `topology` to the node `myid` at `endpoint`; returns the epoch it applied.
pub async fn push(endpoint: &AdminEndpoint, topology: &Topology, myid: &NodeId) -> Result<u64, AdminError> {
    let mut args = vec!["STRATA.TOPOLOGY".to_owned()];
    args.extend(topology.set_args(myid));
    match call(endpoint, &args).await? {
        Reply::Simple(ok) if ok == "OK" => Ok(topology.epoch),
        other => Err(protocol(endpoint, format!("{other:?} to SET"))),
    }
}

/// What the node at `endpoint` has applied (`None`: no topology yet).
pub async fn get(endpoint: &AdminEndpoint) -> Result<Option<Reported>, AdminError> {
    let reply = call(endpoint, &["STRATA.TOPOLOGY".to_owned(), "GET".to_owned()]).await?;
    parse_get(reply).map_err(|e| protocol(endpoint, e.0))
}

/// The `STRATA.TOPOLOGY GET` reply: nil, or `[epoch, myid, node...]`.
pub fn parse_get(reply: Reply) -> Result<Option<Reported>, TopologyError> {
    let items = match reply {
        Reply::Null => return Ok(None),
        Reply::Array(items) => items,
        other => return Err(TopologyError(format!("{other:?} is not a topology"))),
    };
    let mut items = items.into_iter();
    let epoch = match items.next() {
        Some(Reply::Integer(e)) if e >= 0 => e as u64,
        other => return Err(TopologyError(format!("epoch {other:?} is not an integer"))),
    };
    let text = |r: Option<Reply>| match r {
        Some(Reply::Bulk(b)) => String::from_utf8(b).map_err(|_| TopologyError("a field is not UTF-8".to_owned())),
        Some(Reply::Simple(s)) => Ok(s),
        other => Err(TopologyError(format!("{other:?} is not a string"))),
    };
    let myid = NodeId::parse(&text(items.next())?)?;
    let nodes = items.map(|n| TopologyNode::parse(&text(Some(n))?)).collect::<Result<Vec<_>, _>>()?;
    Ok(Some(Reported { epoch, myid, nodes }))
}

/// Sends one command (after AUTH when a password is set) and returns its reply; an error reply
/// becomes [`AdminError::Refused`].
pub async fn call(endpoint: &AdminEndpoint, args: &[String]) -> Result<Reply, AdminError> {
    let work = async {
        let mut stream = connect(endpoint).await?;
        if let Some(password) = &endpoint.password {
            send(&mut stream, &encode(&["AUTH".to_owned(), password.clone()])).await.map_err(|e| io(endpoint, e))?;
            match read_reply(&mut stream).await.map_err(|e| io(endpoint, e))? {
                Reply::Simple(_) => {}
                Reply::Error(message) => return Err(refused(endpoint, format!("AUTH: {message}"))),
                other => return Err(protocol(endpoint, format!("{other:?} to AUTH"))),
            }
        }
        send(&mut stream, &encode(args)).await.map_err(|e| io(endpoint, e))?;
        match read_reply(&mut stream).await.map_err(|e| io(endpoint, e))? {
            Reply::Error(message) => Err(refused(endpoint, message)),
            reply => Ok(reply),
        }
    };
    tokio::time::timeout(endpoint.timeout, work)
        .await
        .unwrap_or_else(|_| Err(AdminError::Timeout { address: endpoint.address.clone(), timeout: endpoint.timeout }))
}

/// Sends `commands` pipelined on one connection (after AUTH when a password is set) and
/// returns their replies in order, error replies included (as [`Reply::Error`]).
pub async fn call_pipelined(endpoint: &AdminEndpoint, commands: &[Vec<String>]) -> Result<Vec<Reply>, AdminError> {
    let work = async {
        let mut stream = connect(endpoint).await?;
        let mut out = Vec::new();
        if let Some(password) = &endpoint.password {
            out.extend(encode(&["AUTH".to_owned(), password.clone()]));
        }
        for command in commands {
            out.extend(encode(command));
        }
        send(&mut stream, &out).await.map_err(|e| io(endpoint, e))?;
        if endpoint.password.is_some()
            && let Reply::Error(message) = read_reply(&mut stream).await.map_err(|e| io(endpoint, e))?
        {
            return Err(refused(endpoint, format!("AUTH: {message}")));
        }
        let mut replies = Vec::with_capacity(commands.len());
        for _ in commands {
            replies.push(read_reply(&mut stream).await.map_err(|e| io(endpoint, e))?);
        }
        Ok(replies)
    };
    tokio::time::timeout(endpoint.timeout, work)
        .await
        .unwrap_or_else(|_| Err(AdminError::Timeout { address: endpoint.address.clone(), timeout: endpoint.timeout }))
}

/// A connection to an admin port, plain or TLS.
trait Duplex: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Duplex for T {}

/// Connects to `endpoint`, with the TLS handshake when it has TLS.
async fn connect(endpoint: &AdminEndpoint) -> Result<BufReader<Box<dyn Duplex>>, AdminError> {
    let tcp = TcpStream::connect(&endpoint.address).await.map_err(|e| io(endpoint, e))?;
    let _ = tcp.set_nodelay(true);
    let stream: Box<dyn Duplex> = match &endpoint.tls {
        None => Box::new(tcp),
        Some(tls) => {
            let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
            Box::new(connector.connect(tls.server_name.clone(), tcp).await.map_err(|e| io(endpoint, e))?)
        }
    };
    Ok(BufReader::new(stream))
}

/// Writes `bytes` and flushes them: TLS holds written records until flushed.
async fn send(stream: &mut BufReader<Box<dyn Duplex>>, bytes: &[u8]) -> std::io::Result<()> {
    stream.get_mut().write_all(bytes).await?;
    stream.get_mut().flush().await
}

/// A request: an array of bulk strings.
pub fn encode(args: &[String]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Longest reply accepted: a topology of thousands of nodes fits well within it.
const MAX_BULK: usize = 64 << 20;

/// Reads one reply (RESP2, and RESP3's `_` null in case the node answers RESP3).
pub async fn read_reply<R: tokio::io::AsyncBufRead + Unpin>(reader: &mut R) -> std::io::Result<Reply> {
    let invalid = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    // Nested arrays are read with an explicit stack rather than recursion (async recursion
    // needs boxing); each frame is (items, how many it still waits for).
    let mut stack: Vec<(Vec<Reply>, usize)> = Vec::new();
    loop {
        let mut line = Vec::new();
        reader.read_until(b'\n', &mut line).await?;
        if line.is_empty() {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed"));
        }
        if !line.ends_with(b"\r\n") {
            return Err(invalid(format!("unterminated line {:?}", String::from_utf8_lossy(&line))));
        }
        let body = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
        let number = |s: &str| s.parse::<i64>().map_err(|_| invalid(format!("{s:?} is not a number")));
        let mut value = match line[0] {
            b'+' => Reply::Simple(body),
            b'-' => Reply::Error(body),
            b':' => Reply::Integer(number(&body)?),
            b'_' => Reply::Null,
            b'$' => match number(&body)? {
                -1 => Reply::Null,
                n if n < 0 || n as usize > MAX_BULK => return Err(invalid(format!("bulk length {n}"))),
                n => {
                    let mut data = vec![0; n as usize + 2];
                    reader.read_exact(&mut data).await?;
                    data.truncate(n as usize);
                    Reply::Bulk(data)
                }
            },
            b'*' => match number(&body)? {
                -1 => Reply::Null,
                0 => Reply::Array(Vec::new()),
                n if n < 0 || n as usize > MAX_BULK => return Err(invalid(format!("array length {n}"))),
                n => {
                    stack.push((Vec::with_capacity(n as usize), n as usize));
                    continue;
                }
            },
            other => return Err(invalid(format!("unknown reply type {:?}", other as char))),
        };
        // Complete the arrays this value finishes.
        loop {
            let Some((items, wanted)) = stack.last_mut() else { return Ok(value) };
            items.push(value);
            if items.len() < *wanted {
                break;
            }
            let (items, _) = stack.pop().expect("a frame is open");
            value = Reply::Array(items);
        }
    }
}

/// An I/O error, or a TLS one: rustls' errors reach us wrapped in `std::io::Error`, at the
/// handshake or (TLS 1.3: a client certificate refused) at the first read after it.
fn io(endpoint: &AdminEndpoint, source: std::io::Error) -> AdminError {
    let address = endpoint.address.clone();
    match source.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()) {
        Some(tls) => AdminError::Tls { address, source: tls.clone() },
        None => AdminError::Io { address, source },
    }
}

fn refused(endpoint: &AdminEndpoint, message: String) -> AdminError {
    AdminError::Refused { address: endpoint.address.clone(), message }
}

fn protocol(endpoint: &AdminEndpoint, what: String) -> AdminError {
    AdminError::Protocol { address: endpoint.address.clone(), what }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{SlotRange, spread};

    async fn decode(bytes: &[u8]) -> std::io::Result<Reply> {
        read_reply(&mut BufReader::new(bytes)).await
    }

    #[tokio::test]
    async fn replies_decode() {
        assert_eq!(decode(b"+OK\r\n").await.unwrap(), Reply::Simple("OK".into()));
        assert_eq!(decode(b"-ERR stale epoch 4\r\n").await.unwrap(), Reply::Error("ERR stale epoch 4".into()));
        assert_eq!(decode(b"$-1\r\n").await.unwrap(), Reply::Null);
        assert_eq!(decode(b"_\r\n").await.unwrap(), Reply::Null);
        assert_eq!(
            decode(b"*3\r\n:5\r\n*2\r\n$2\r\nab\r\n$0\r\n\r\n+x\r\n").await.unwrap(),
            Reply::Array(vec![
                Reply::Integer(5),
                Reply::Array(vec![Reply::Bulk(b"ab".to_vec()), Reply::Bulk(Vec::new())]),
                Reply::Simple("x".into()),
            ])
        );
        assert!(decode(b"*2\r\n:1\r\n").await.is_err(), "truncated array");
        assert!(decode(b"$5\r\nab").await.is_err(), "truncated bulk");
        assert!(decode(b"?\r\n").await.is_err());
    }

    #[test]
    fn requests_are_bulk_string_arrays() {
        assert_eq!(encode(&["AUTH".into(), "p w".into()]), b"*2\r\n$4\r\nAUTH\r\n$3\r\np w\r\n");
    }

    #[test]
    fn get_replies_parse() {
        let me = NodeId::of_local(7000, 0);
        let node = TopologyNode {
            id: me.clone(),
            ip: "127.0.0.1".into(),
            hostname: None,
            direct_port: 7100,
            plain_port: 7000,
            slots: spread(1).remove(0),
            admin_port: 7200,
        };
        let reply = Reply::Array(vec![
            Reply::Integer(3),
            Reply::Bulk(me.to_string().into_bytes()),
            Reply::Bulk(node.render().into_bytes()),
        ]);
        let reported = parse_get(reply).unwrap().unwrap();
        assert_eq!(reported.epoch, 3);
        assert_eq!(reported.me(), Some(&node));
        assert_eq!(reported.me().unwrap().slots, [SlotRange { first: 0, last: 16383 }]);
        assert_eq!(parse_get(Reply::Null).unwrap(), None);
        assert!(parse_get(Reply::Array(vec![Reply::Bulk(b"3".to_vec())])).is_err(), "epoch as a string");
        assert!(parse_get(Reply::Simple("OK".into())).is_err());
    }

    /// A node's admin port as the contract words it, for one connection.
    async fn fake_node(password: Option<&'static str>) -> (String, tokio::task::JoinHandle<Vec<Vec<String>>>) {
        fake_node_with(password, None).await
    }

    /// As [`fake_node`], over TLS when `tls` is set (a failed handshake ends it, having seen nothing).
    async fn fake_node_with(
        password: Option<&'static str>,
        tls: Option<tokio_rustls::TlsAcceptor>,
    ) -> (String, tokio::task::JoinHandle<Vec<Vec<String>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let task = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let stream: Box<dyn Duplex> = match tls {
                None => Box::new(stream),
                Some(acceptor) => match acceptor.accept(stream).await {
                    Ok(tls) => Box::new(tls),
                    Err(_) => return Vec::new(),
                },
            };
            let mut stream = BufReader::new(stream);
            let mut seen = Vec::new();
            let mut authed = password.is_none();
            while let Ok(Reply::Array(items)) = read_reply(&mut stream).await {
                let args: Vec<String> = items
                    .into_iter()
                    .map(|i| match i {
                        Reply::Bulk(b) => String::from_utf8(b).unwrap(),
                        other => panic!("{other:?}"),
                    })
                    .collect();
                let answer: &[u8] = match (args[0].as_str(), authed) {
                    ("AUTH", _) if Some(args[1].as_str()) == password => {
                        authed = true;
                        b"+OK\r\n"
                    }
                    ("AUTH", _) => b"-WRONGPASS invalid password\r\n",
                    (_, false) => b"-NOAUTH Authentication required.\r\n",
                    (_, true) if args[2] == "1" => b"-ERR stale epoch 1: this node has applied epoch 2\r\n",
                    _ => b"+OK\r\n",
                };
                seen.push(args);
                send(&mut stream, answer).await.unwrap();
            }
            seen
        });
        (address, task)
    }

    fn three_nodes(epoch: u64) -> Topology {
        let nodes = spread(3)
            .into_iter()
            .enumerate()
            .map(|(i, slots)| TopologyNode {
                id: NodeId::of_local(7000, i as u32),
                ip: "127.0.0.1".into(),
                hostname: None,
                direct_port: 7100 + i as u16,
                plain_port: 7000 + i as u16,
                slots,
                admin_port: 7200 + i as u16,
            })
            .collect();
        Topology { epoch, nodes }
    }

    #[tokio::test]
    async fn push_authenticates_and_reports_the_applied_epoch() {
        let (address, node) = fake_node(Some("s3cret")).await;
        let me = NodeId::of_local(7000, 1);
        let endpoint = AdminEndpoint::new(address, Some("s3cret".into()));
        assert_eq!(push(&endpoint, &three_nodes(2), &me).await.unwrap(), 2);
        drop(endpoint);
        let seen = node.await.unwrap();
        assert_eq!(seen[0], ["AUTH", "s3cret"]);
        assert_eq!(seen[1][..4], ["STRATA.TOPOLOGY", "SET", "2", me.as_str()]);
        assert_eq!(seen[1].len(), 4 + 3);
    }

    #[tokio::test]
    async fn refusals_carry_the_nodes_words() {
        let (address, _node) = fake_node(Some("s3cret")).await;
        let wrong = AdminEndpoint::new(address, Some("nope".into()));
        let err = push(&wrong, &three_nodes(2), &NodeId::of_local(7000, 0)).await.unwrap_err();
        assert!(matches!(&err, AdminError::Refused { message, .. } if message.contains("WRONGPASS")), "{err}");

        let (address, _node) = fake_node(None).await;
        let err =
            push(&AdminEndpoint::new(address, None), &three_nodes(1), &NodeId::of_local(7000, 0)).await.unwrap_err();
        assert!(err.to_string().contains("stale epoch 1"), "{err}");
    }

    /// A node's TLS: `node.crt` for `demo-0.demo-headless.shop.svc` and 127.0.0.1 (server and
    /// client auth), client certificates required and checked against `ca.crt`.
    fn tls_node(pki: &crate::test_pki::Pki) -> tokio_rustls::TlsAcceptor {
        pki.issue("node", &["demo-0.demo-headless.shop.svc", "127.0.0.1"], "serverAuth,clientAuth");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(pem_certificates(&pki.read("ca.crt")).unwrap().remove(0)).unwrap();
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .unwrap();
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                pem_certificates(&pki.read("node.crt")).unwrap(),
                pem_private_key(&pki.read("node.key")).unwrap(),
            )
            .unwrap();
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    }

    fn tls_endpoint(address: String, pki: &crate::test_pki::Pki, name: &str, identity: bool) -> AdminEndpoint {
        let identity = identity.then(|| {
            (pem_certificates(&pki.read("node.crt")).unwrap(), pem_private_key(&pki.read("node.key")).unwrap())
        });
        let config = tls_config(pem_certificates(&pki.read("ca.crt")).unwrap(), identity).unwrap();
        let server_name = ServerName::try_from(name.to_owned()).unwrap();
        AdminEndpoint::new(address, Some("s3cret".into())).with_tls(AdminTls { config, server_name })
    }

    #[tokio::test]
    async fn tls_pushes_with_a_client_certificate_and_checks_the_nodes_name() {
        let pki = crate::test_pki::Pki::new("client");
        let acceptor = tls_node(&pki);
        let me = NodeId::of_local(7000, 1);

        let (address, node) = fake_node_with(Some("s3cret"), Some(acceptor.clone())).await;
        let endpoint = tls_endpoint(address, &pki, "demo-0.demo-headless.shop.svc", true);
        assert_eq!(push(&endpoint, &three_nodes(2), &me).await.unwrap(), 2);
        drop(endpoint);
        let seen = node.await.unwrap();
        assert_eq!(seen[0], ["AUTH", "s3cret"]);
        assert_eq!(seen[1][..3], ["STRATA.TOPOLOGY", "SET", "2"]);

        // No client certificate: the node refuses the handshake (TLS 1.3 tells at the first read).
        let (address, node) = fake_node_with(Some("s3cret"), Some(acceptor.clone())).await;
        let endpoint = tls_endpoint(address, &pki, "demo-0.demo-headless.shop.svc", false);
        let err = push(&endpoint, &three_nodes(2), &me).await.unwrap_err();
        assert!(matches!(&err, AdminError::Tls { source: rustls::Error::AlertReceived(_), .. }), "{err:?}");
        assert!(node.await.unwrap().is_empty(), "nothing reached the node");

        // A name the certificate does not cover: refused before anything is sent.
        let (address, node) = fake_node_with(Some("s3cret"), Some(acceptor.clone())).await;
        let endpoint = tls_endpoint(address, &pki, "demo-1.other-headless.shop.svc", true);
        let err = get(&endpoint).await.unwrap_err();
        assert!(matches!(&err, AdminError::Tls { source: rustls::Error::InvalidCertificate(_), .. }), "{err:?}");
        assert!(err.to_string().contains("TLS"), "{err}");
        assert!(node.await.unwrap().is_empty());

        // A node whose certificate another CA signed.
        let other = crate::test_pki::Pki::new("client-other");
        let (address, _node) = fake_node_with(Some("s3cret"), Some(tls_node(&other))).await;
        let err = get(&tls_endpoint(address, &pki, "demo-0.demo-headless.shop.svc", true)).await.unwrap_err();
        assert!(matches!(&err, AdminError::Tls { source: rustls::Error::InvalidCertificate(_), .. }), "{err:?}");

        // Pipelined calls go over TLS alike.
        let (address, node) = fake_node_with(Some("s3cret"), Some(acceptor)).await;
        let endpoint = tls_endpoint(address, &pki, "127.0.0.1", true);
        let commands = vec![vec!["PING".to_owned(), "x".to_owned(), "2".to_owned()]; 2];
        let replies = call_pipelined(&endpoint, &commands).await.unwrap();
        assert_eq!(replies, [Reply::Simple("OK".into()), Reply::Simple("OK".into())]);
        drop(endpoint);
        assert_eq!(node.await.unwrap().len(), 3, "AUTH and two commands");
    }

    #[test]
    fn pem_input_that_is_not_a_certificate_or_key_is_named() {
        assert!(pem_certificates(b"").unwrap_err().contains("no PEM certificate"));
        assert!(pem_certificates(b"-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n").is_err());
        let pki = crate::test_pki::Pki::new("pem");
        assert!(pem_private_key(&pki.read("ca.crt")).unwrap_err().contains("no PEM private key"));
        assert!(pem_private_key(&pki.read("ca.key")).is_ok());
        // A key that is not the certificate's.
        pki.issue("a", &["a.test"], "clientAuth");
        let roots = pem_certificates(&pki.read("ca.crt")).unwrap();
        let mismatched = (pem_certificates(&pki.read("a.crt")).unwrap(), pem_private_key(&pki.read("ca.key")).unwrap());
        assert!(tls_config(roots, Some(mismatched)).unwrap_err().contains("do not make a client identity"));
    }

    #[tokio::test]
    async fn a_silent_node_times_out() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut endpoint = AdminEndpoint::new(listener.local_addr().unwrap().to_string(), None);
        endpoint.timeout = Duration::from_millis(200);
        let started = std::time::Instant::now();
        let err = get(&endpoint).await.unwrap_err();
        assert!(matches!(err, AdminError::Timeout { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(2));
        drop(listener);
    }
}
