//! `resource-plane demo`: two capsules on loopback in a fresh temporary directory. An operator
//! lists and reads capsule A's export; A shares a file with B by handle, bound to the identity
//! key B's card publishes (D-14); B fetches it, proving the redeem with that key; a forged
//! handle is refused, and so is the real handle replayed with B's audience but without B's key;
//! both traces are summarised. Exits 0 only when every step behaved as the spec says. Logs name
//! handles by `handle_id`, never by token.

use crate::backends::tls::PeerTls;
use crate::backends::{JsonlTraceSink, OsFilesystem, SystemClock};
use crate::confine::{Confinement, ConfinementReport};
use crate::http::client::{Limits, PeerClient, PeerResponse};
use crate::http::response::AUDIENCE;
use crate::http::{ListenerConfig, serve};
use crate::policy::Address;
use crate::scope::Containment;
use crate::{Capsule, Manifest};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

const REPORT: &str = "# Quarterly report\n\nAll green. Written by capsule A.\n";

struct Running {
    capsule: Arc<Capsule>,
    address: Address,
    stop: watch::Sender<bool>,
    server: tokio::task::JoinHandle<()>,
    trace: PathBuf,
}

fn step(text: &str) {
    println!("demo: {text}");
}

/// Runs the demo: the world is built and both listeners bound on this thread; a second thread
/// confines itself to what both capsules need together and runs them (its async runtime's
/// threads start inside the wall); this thread, unconfined, removes the temporary directory at
/// the end.
pub(crate) fn run() -> ExitCode {
    let outcome = tempdir().and_then(|temp| {
        let world = prepare(temp.path())?;
        let ran = std::thread::Builder::new()
            .name("demo".to_owned())
            .spawn(move || confined(world))
            .map_err(|e| e.to_string())?
            .join()
            .unwrap_or_else(|_| Err("the demo thread panicked".to_owned()));
        drop(temp);
        ran
    });
    match outcome {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(failure) => {
            super::log::say!("demo failed: {failure}");
            println!("{}", json!({"demo": "failed", "reason": failure}));
            ExitCode::FAILURE
        }
    }
}

/// One capsule, ready to launch: its manifest, workdir handle, trace and bound listener.
struct Prepared {
    name: &'static str,
    manifest: Manifest,
    fs: OsFilesystem,
    sink: JsonlTraceSink,
    trace: PathBuf,
    listener: std::net::TcpListener,
}

/// Both capsules and the directory that holds them.
struct World {
    root: PathBuf,
    a: Prepared,
    b: Prepared,
}

/// Writes the two workdirs, binds both listeners, opens both workdirs and traces: everything
/// that happens before the wall goes up.
#[allow(clippy::disallowed_methods)] // the demo builds its own temporary world
fn prepare(root: &Path) -> Result<World, String> {
    std::fs::create_dir_all(root.join("a/out/notes")).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(root.join("b")).map_err(|e| e.to_string())?;
    std::fs::write(root.join("a/out/report.md"), REPORT).map_err(|e| e.to_string())?;
    std::fs::write(root.join("a/out/notes/todo.txt"), "ship it\n").map_err(|e| e.to_string())?;
    std::fs::write(root.join("a/secret.txt"), "not exported\n").map_err(|e| e.to_string())?;
    step(&format!("workdirs under {}", root.display()));
    let bind = || -> Result<(std::net::TcpListener, u16), String> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        Ok((listener, port))
    };
    let (listener_a, port_a) = bind()?;
    let (listener_b, port_b) = bind()?;
    // A reaches B's card to share; B redeems at A: each allow rule names its one port, so the
    // wall lets TCP connect only to these two.
    let yaml_a = format!(
        "name: reporter\nexports:\n  files: {{ root: out/, mode: read-only, max_bytes: 10Mi }}\n  \
         peer_files: {{ root: out/, max_ttl: 15m }}\ncapabilities:\n  network: {{ allow: [\"127.0.0.1:{port_b}\"] }}\n"
    );
    let yaml_b = format!(
        "name: reader\ncapabilities:\n  peer_fetch: {{ allow: [\"127.0.0.1:{port_a}\"] }}\n"
    );
    let capsule = |name: &'static str, yaml: &str, listener| -> Result<Prepared, String> {
        let trace = root.join(format!("trace-{name}.jsonl"));
        Ok(Prepared {
            name,
            manifest: Manifest::from_yaml(yaml)
                .map_err(|e| e.to_string())?
                .manifest,
            fs: OsFilesystem::open(&root.join(name)).map_err(|e| e.to_string())?,
            sink: JsonlTraceSink::open(&trace).map_err(|e| e.to_string())?,
            trace,
            listener,
        })
    };
    Ok(World {
        root: root.to_path_buf(),
        a: capsule("a", &yaml_a, listener_a)?,
        b: capsule("b", &yaml_b, listener_b)?,
    })
}

/// On the demo thread: puts up one wall for both capsules, then starts the async runtime
/// inside it and runs the demo. The wall is the union of the two capsules' (both workdirs,
/// B's `peer-in/`, the two ports) plus reading the demo's directory, where the operator reads
/// both traces back at the end.
fn confined(world: World) -> Result<String, String> {
    super::cores();
    let wall = Confinement::new(&world.a.manifest, world.root.join("a"))
        .also(&world.b.manifest, world.root.join("b"))
        .read(&world.root);
    let report = wall.apply().map_err(|e| format!("confinement: {e}"))?;
    step(&format!(
        "confined: landlock ABI {}, {}",
        report.landlock_abi, report.status
    ));
    let runtime = super::runtime().ok_or("the async runtime could not start")?;
    let outcome = runtime.block_on(demo(world, &report));
    runtime.shutdown_timeout(Duration::from_millis(200));
    outcome
}

async fn start(prepared: Prepared) -> Result<Running, String> {
    let Prepared {
        name,
        manifest,
        fs,
        sink,
        trace,
        listener,
    } = prepared;
    let listener = TcpListener::from_std(listener).map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let url = format!("http://127.0.0.1:{port}");
    let capsule = Arc::new(
        Capsule::builder(&manifest)
            .filesystem(Arc::new(fs))
            .clock(Arc::new(SystemClock))
            .trace(Arc::new(sink))
            .advertised_url(url.clone())
            .containment(Containment::Sealed)
            .cores(super::cores())
            .launch()
            .map_err(|e| e.to_string())?,
    );
    let (stop, mut stopped) = watch::channel(false);
    let router = capsule.router();
    let server = tokio::spawn(async move {
        let shutdown = async move {
            let _ = stopped.wait_for(|s| *s).await;
        };
        let _ = serve(listener, router, ListenerConfig::default(), shutdown).await;
    });
    step(&format!(
        "capsule {} ({}) listening on {url}",
        name.to_uppercase(),
        capsule.audience()
    ));
    Ok(Running {
        capsule,
        address: Address::parse(&url).map_err(|e| e.to_string())?,
        stop,
        server,
        trace,
    })
}

async fn get(
    client: &PeerClient,
    to: &Address,
    path: &str,
    audience: Option<&str>,
) -> Result<PeerResponse, String> {
    let headers = match audience {
        Some(a) => vec![(
            AUDIENCE,
            http::HeaderValue::from_str(a).map_err(|e| e.to_string())?,
        )],
        None => vec![],
    };
    let limits = Limits {
        connect: Duration::from_secs(5),
        total: Duration::from_secs(30),
        max_body: 64 << 20,
    };
    client
        .get(to, path, &headers, limits)
        .await
        .map_err(|e| format!("{e:?}"))
}

fn check(ok: bool, what: &str) -> Result<(), String> {
    if ok {
        step(&format!("ok: {what}"));
        Ok(())
    } else {
        Err(what.to_owned())
    }
}

#[allow(clippy::disallowed_methods)] // the demo inspects its own temporary world
async fn demo(world: World, confinement: &ConfinementReport) -> Result<String, String> {
    let root = world.root.as_path();
    let a = start(world.a).await?;
    let b = start(world.b).await?;
    let port_a = a.address.effective_port();
    let client = PeerClient::new(PeerTls::system().client_config());

    // 1. The operator lists A's export.
    let listing = get(&client, &a.address, "/resources/files", None).await?;
    let listing_json: Value = serde_json::from_slice(&listing.body).map_err(|e| e.to_string())?;
    let listed = listing_json["entries"].as_array().map_or(0, Vec::len);
    check(
        listing.status == 200 && listed == 2,
        "operator lists 2 files under out/",
    )?;

    // 2. The operator reads one file.
    let read = get(&client, &a.address, "/resources/files/report.md", None).await?;
    let etag = read
        .headers
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .trim_matches('"')
        .to_owned();
    let expected_etag = format!("sha256:{}", crate::hex::sha256_hex(REPORT.as_bytes()));
    check(
        read.status == 200 && etag == expected_etag && read.body == REPORT.as_bytes(),
        "operator reads report.md with a matching etag",
    )?;

    // 3. Escapes are refused.
    let escape = get(
        &client,
        &a.address,
        "/resources/files/..%2Fsecret.txt",
        None,
    )
    .await?;
    check(
        escape.status == 403,
        "a path escaping the root is refused with 403 outside_root",
    )?;

    // 4. A shares report.md with B, whose card publishes B's identity key (D-14.1).
    let b_key = b.capsule.identity_key().unwrap_or_default();
    let card = get(&client, &b.address, "/.well-known/agent-card.json", None).await?;
    let card: Value = serde_json::from_slice(&card.body).map_err(|e| e.to_string())?;
    check(
        !b_key.is_empty() && card["capabilities"]["extensions"][0]["params"]["key"] == json!(b_key),
        "B's agent card publishes its Ed25519 identity key",
    )?;
    let port_b = b.address.effective_port();
    let shared = a
        .capsule
        .tools()
        .call(
            "share-file",
            json!({"path": "report.md", "peer": format!("127.0.0.1:{port_b}")}),
        )
        .await
        .map_err(|e| format!("share-file: {} {}", e.code, e.message))?;
    let token = shared["handle"].as_str().unwrap_or_default().to_owned();
    let handle_id = shared["handle_id"].as_str().unwrap_or_default().to_owned();
    check(
        shared["audience"] == json!(b.capsule.audience()),
        &format!(
            "A minted handle {handle_id} for {}, bound to B's key",
            b.capsule.audience()
        ),
    )?;

    // 5. B fetches it, sending a proof signed by its key (D-14.3).
    let fetched = b
        .capsule
        .tools()
        .call(
            "fetch-peer-file",
            json!({"peer": format!("127.0.0.1:{port_a}"), "handle": token}),
        )
        .await
        .map_err(|e| format!("fetch-peer-file: {} {}", e.code, e.message))?;
    let fetched_path = fetched["path"].as_str().unwrap_or_default().to_owned();
    let fetched_sha = fetched["sha256"].as_str().unwrap_or_default().to_owned();
    let landed = std::fs::read(root.join("b").join(&fetched_path)).map_err(|e| e.to_string())?;
    check(
        fetched_path.starts_with("peer-in/")
            && landed == REPORT.as_bytes()
            && format!("sha256:{fetched_sha}") == etag,
        &format!("B fetched the file into {fetched_path}, its redeem proved by its key"),
    )?;

    // 6. A forged handle is refused, identically to any other forgery.
    let forged = forge(&token);
    let refused = get(
        &client,
        &a.address,
        &format!("/resources/peer/{forged}"),
        Some(b.capsule.audience()),
    )
    .await?;
    let body: Value = serde_json::from_slice(&refused.body).unwrap_or(Value::Null);
    let forgery = body["error"].as_str().unwrap_or_default().to_owned();
    check(
        refused.status == 403 && forgery == "handle_not_valid",
        "a forged handle is refused with 403 handle_not_valid",
    )?;
    let third = get(
        &client,
        &a.address,
        &format!("/resources/peer/{token}"),
        Some("mallory@127.0.0.1:1"),
    )
    .await?;
    check(
        third.status == 403 && third.body == refused.body,
        "a third capsule's audience gets the same refusal",
    )?;
    let intercepted = get(
        &client,
        &a.address,
        &format!("/resources/peer/{token}"),
        Some(b.capsule.audience()),
    )
    .await?;
    check(
        intercepted.status == 403 && intercepted.body == refused.body,
        "the real handle replayed with B's audience but without B's key gets the same refusal",
    )?;

    // 7. Shut both down and summarise the traces.
    for running in [&a, &b] {
        let _ = running.stop.send(true);
    }
    let (a_server, b_server) = (a.server, b.server);
    let _ = tokio::join!(a_server, b_server);
    a.capsule.end_session();
    b.capsule.end_session();
    let mut lines = Vec::new();
    for (label, trace) in [("A", &a.trace), ("B", &b.trace)] {
        let text = std::fs::read_to_string(trace).map_err(|e| e.to_string())?;
        check(
            !crate::redact::holds_token(&text),
            &format!("trace {label} holds no token"),
        )?;
        if label == "A" {
            let proved = |event_type: &str| {
                text.lines()
                    .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                    .any(|e| {
                        e["event_type"] == event_type
                            && e["outcome"] == "ok"
                            && e["audience_proof"] == "ed25519"
                    })
            };
            check(
                proved("peer_handle_mint") && proved("peer_handle_redeem"),
                "trace A records the mint and the redeem with audience_proof ed25519",
            )?;
        }
        let mut kinds = std::collections::BTreeMap::<String, usize>::new();
        for line in text.lines() {
            let event: Value =
                serde_json::from_str(line).map_err(|e| format!("trace {label}: {e}"))?;
            *kinds
                .entry(format!(
                    "{}:{}",
                    event["event_type"].as_str().unwrap_or("?"),
                    event["outcome"].as_str().unwrap_or("?")
                ))
                .or_default() += 1;
        }
        step(&format!(
            "trace {label}: {} lines {kinds:?}",
            text.lines().count()
        ));
        lines.push(text.lines().count());
    }
    Ok(json!({
        "demo": "ok",
        "listed": listed,
        "read_etag": etag,
        "handle_id": handle_id,
        "fetched_path": fetched_path,
        "fetched_sha256": fetched_sha,
        "forgery": forgery,
        "trace_lines": {"A": lines[0], "B": lines[1]},
        "confinement": confinement.to_json(),
    })
    .to_string())
}

/// Flips one character of the MAC segment.
fn forge(token: &str) -> String {
    let mut bytes = token.as_bytes().to_vec();
    if let Some(last) = bytes.last_mut() {
        *last = if *last == b'A' { b'E' } else { b'A' };
    }
    String::from_utf8(bytes).unwrap_or_default()
}

/// A fresh temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    #[allow(clippy::disallowed_methods)]
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[allow(clippy::disallowed_methods)]
fn tempdir() -> Result<TempDir, String> {
    let nonce = super::random_hex::<8>();
    let path = std::env::temp_dir().join(format!("resource-plane-demo-{nonce}"));
    std::fs::create_dir_all(&path).map_err(|e| e.to_string())?;
    Ok(TempDir(path))
}
