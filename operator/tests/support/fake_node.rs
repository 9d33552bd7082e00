//! A node's admin port as `/work/cluster-contract.md` words it (`AUTH`, `STRATA.TOPOLOGY
//! SET|GET`), for controller tests that have no kubelet to run real nodes: it listens on a
//! loopback address the test writes into a pod's status as its IP, so the operator pushes to it
//! exactly as to a pod.

use std::sync::{Arc, Mutex};

use strata_operator::resources::ADMIN_PORT;
use strata_operator::topology::client::{Reply, read_reply};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// What the node holds: its applied topology (epoch, myid, nodes) and the passwords it was sent.
#[derive(Default, Debug, Clone)]
pub struct NodeState {
    pub topology: Option<(u64, String, Vec<String>)>,
    pub auths: Vec<String>,
}

pub struct FakeNode {
    pub ip: String,
    pub state: Arc<Mutex<NodeState>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeNode {
    /// Listens on `ip`:16379 (any 127.x.y.z address), requiring AUTH with `password`.
    pub async fn start(ip: &str, password: &str) -> FakeNode {
        Self::start_with(ip, password, NodeState::default()).await
    }

    /// The same node with state kept from before (a restart with its volume).
    pub async fn start_with(ip: &str, password: &str, state: NodeState) -> FakeNode {
        let listener = TcpListener::bind((ip, ADMIN_PORT as u16))
            .await
            .unwrap_or_else(|e| panic!("binding {ip}:{ADMIN_PORT} for a fake node: {e}"));
        let state = Arc::new(Mutex::new(state));
        let password = password.to_owned();
        let shared = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let state = shared.clone();
                let password = password.clone();
                tokio::spawn(async move {
                    let mut stream = BufReader::new(stream);
                    let mut authed = false;
                    while let Ok(Reply::Array(items)) = read_reply(&mut stream).await {
                        let args: Vec<String> = items
                            .into_iter()
                            .map(|i| match i {
                                Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
                                _ => String::new(),
                            })
                            .collect();
                        let answer = answer(&args, &mut authed, &password, &state);
                        if stream.get_mut().write_all(&answer).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        FakeNode { ip: ip.to_owned(), state, task }
    }

    pub fn epoch(&self) -> u64 {
        self.state.lock().unwrap().topology.as_ref().map_or(0, |t| t.0)
    }

    /// Stops listening and serving (the pod is gone); returns what it held.
    pub fn stop(self) -> NodeState {
        self.task.abort();
        self.state.lock().unwrap().clone()
    }
}

impl Drop for FakeNode {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn answer(args: &[String], authed: &mut bool, password: &str, state: &Mutex<NodeState>) -> Vec<u8> {
    let mut state = state.lock().unwrap();
    let upper: Vec<String> = args.iter().take(2).map(|a| a.to_ascii_uppercase()).collect();
    match upper.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["AUTH", _] => {
            state.auths.push(args[1].clone());
            if args[1] == password {
                *authed = true;
                b"+OK\r\n".to_vec()
            } else {
                b"-WRONGPASS invalid username-password pair or user is disabled.\r\n".to_vec()
            }
        }
        _ if !*authed => b"-NOAUTH Authentication required.\r\n".to_vec(),
        ["STRATA.TOPOLOGY", "GET"] => match &state.topology {
            None => b"$-1\r\n".to_vec(),
            Some((epoch, myid, nodes)) => {
                let mut out = format!("*{}\r\n:{epoch}\r\n", nodes.len() + 2).into_bytes();
                for s in std::iter::once(myid).chain(nodes) {
                    out.extend_from_slice(format!("${}\r\n{s}\r\n", s.len()).as_bytes());
                }
                out
            }
        },
        ["STRATA.TOPOLOGY", "SET"] if args.len() >= 4 => {
            let Ok(epoch) = args[2].parse::<u64>() else { return b"-ERR invalid epoch\r\n".to_vec() };
            let (myid, nodes) = (args[3].clone(), args[4..].to_vec());
            if !nodes.iter().any(|n| n.starts_with(&format!("{myid} "))) {
                return b"-ERR invalid topology: myid is not one of the nodes\r\n".to_vec();
            }
            match &state.topology {
                Some((current, _, _)) if epoch < *current => {
                    format!("-ERR stale epoch {epoch}: this node has applied epoch {current}\r\n").into_bytes()
                }
                Some((current, id, held)) if epoch == *current && (id != &myid || held != &nodes) => {
                    format!("-ERR epoch {epoch} is already applied with a different topology\r\n").into_bytes()
                }
                _ => {
                    state.topology = Some((epoch, myid, nodes));
                    b"+OK\r\n".to_vec()
                }
            }
        }
        _ => b"-ERR unknown command\r\n".to_vec(),
    }
}
