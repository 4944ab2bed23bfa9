//! How a runtime offers the crate's tools to a model: adopt each capsule's granted tools into the
//! runtime's own registry, print them as an LLM function-calling list, and dispatch the model's
//! calls. Two capsules run in this process over in-memory filesystems, each served on a
//! loopback listener; `reporter` shares a file with `reader`, which fetches it.
//!
//! Run: `cargo run --example tool_registry`.
#![allow(clippy::disallowed_methods)] // a composition root: it binds its own sockets

use resource_plane::backends::{MemoryFilesystem, RecordingTraceSink, SystemClock};
use resource_plane::http::{ListenerConfig, serve};
use resource_plane::tools::{
    CallOptions, FetchPeerFileOutput, ShareFile, ShareFileInput, Tool, ToolError, ToolInventory,
    Ttl,
};
use resource_plane::{Backends, Capsule, CapsuleConfig, Manifest};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const REPORTER: &str = "
name: reporter
exports:
  peer_files: { root: out/, max_ttl: 15m }
capabilities:
  network: { allow: [\"127.0.0.1\"] }
";

const READER: &str = "
name: reader
capabilities:
  peer_fetch: { allow: [\"127.0.0.1\"] }
";

/// The runtime's own tool registry: every tool a model may call, by the name the model sees,
/// with the call options of the session it belongs to.
#[derive(Default)]
struct Registry {
    tools: BTreeMap<&'static str, (Arc<dyn Tool>, CallOptions)>,
}

impl Registry {
    /// Takes in the tools a capsule was granted; a capsule without a grant has no such tool.
    /// Each keeps its inventory's call options, so that a call dropped once the capsule's
    /// session has ended is recorded as abandoned, not as cancelled.
    fn adopt(&mut self, granted: &ToolInventory) {
        for tool in granted.iter() {
            self.tools
                .insert(tool.name(), (tool.clone(), granted.call_options()));
        }
    }

    /// What the model is offered: `[{"name","description","parameters"}, …]`.
    fn function_list(&self) -> Value {
        Value::Array(
            self.tools
                .values()
                .map(|(tool, _)| tool.function())
                .collect(),
        )
    }

    /// Runs one function call the model made, in its tool's session, bounded by the runtime's
    /// own deadline.
    async fn dispatch(&self, name: &str, arguments: Value) -> Result<Value, ToolError> {
        let Some((tool, session)) = self.tools.get(name) else {
            return Err(ToolError::of(resource_plane::Code::UnknownTool));
        };
        let options = session.clone().with_deadline(Duration::from_secs(30));
        tool.call_with(arguments, options).await
    }
}

/// One capsule over memory, served on its own loopback listener until `stop` fires.
struct Running {
    capsule: Capsule,
    fs: Arc<MemoryFilesystem>,
    trace: Arc<RecordingTraceSink>,
    url: String,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn start(
    yaml: &str,
    files: &[(&str, &str)],
    stop: &tokio::sync::watch::Receiver<bool>,
) -> Result<Running, Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let fs = Arc::new(MemoryFilesystem::new());
    for (path, text) in files {
        fs.add_file(path, *text, 1_787_577_327_015);
    }
    let trace = Arc::new(RecordingTraceSink::new());
    let capsule = Capsule::launch(
        &Manifest::from_yaml(yaml)?.manifest,
        CapsuleConfig::new(url.clone())?,
        Backends {
            fs: fs.clone(),
            clock: Arc::new(SystemClock),
            keys: None,
            trace: trace.clone(),
        },
    )?;
    let mut stop = stop.clone();
    let served = tokio::spawn(serve(
        listener,
        capsule.router(),
        ListenerConfig::default(),
        async move {
            let _ = stop.wait_for(|stop| *stop).await;
        },
    ));
    Ok(Running {
        capsule,
        fs,
        trace,
        url,
        served,
    })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let reporter = start(
        REPORTER,
        &[("out/q3-report.md", "Q3: all green\n")],
        &stopping,
    )
    .await?;
    let reader = start(READER, &[], &stopping).await?;

    // Each agent's runtime offers its model what its capsule was granted, and nothing else.
    let mut reporter_tools = Registry::default();
    reporter_tools.adopt(reporter.capsule.tools());
    let mut reader_tools = Registry::default();
    reader_tools.adopt(reader.capsule.tools());
    println!(
        "reporter's model is offered:\n{}",
        serde_json::to_string_pretty(&reporter_tools.function_list())?
    );
    println!(
        "reader's model is offered:\n{}",
        serde_json::to_string_pretty(&reader_tools.function_list())?
    );

    // The runtime calls share-file itself, typed.
    let share = reporter
        .capsule
        .tools()
        .typed::<ShareFile>()
        .ok_or("reporter declares exports.peer_files")?;
    let shared = share
        .share(ShareFileInput::new("q3-report.md", &reader.url).with_ttl(Ttl::from("10m")))
        .await?;
    // Its Debug names the handle by handle_id: the token itself goes to the peer only.
    println!("share-file: {shared:?}");

    // reader's model asks for the file: a function call as a model writes it, dispatched by
    // name, its JSON result read back into the typed output.
    let arguments = json!({"peer": reporter.url, "handle": shared.handle});
    let result = reader_tools.dispatch("fetch-peer-file", arguments).await?;
    let fetched: FetchPeerFileOutput = serde_json::from_value(result)?;
    println!("fetch-peer-file: {fetched:?}");
    let landed = reader
        .fs
        .file_bytes(&fetched.path)
        .ok_or("the landed file")?;
    println!(
        "{} holds {:?}",
        fetched.path,
        String::from_utf8_lossy(&landed)
    );

    // A model asking for a tool its capsule was not granted gets the usual refusal.
    let refused = reader_tools
        .dispatch(
            "share-file",
            json!({"path": "q3-report.md", "peer": reporter.url}),
        )
        .await
        .expect_err("reader declares no exports.peer_files");
    println!("share-file on reader: {refused}");

    // The session ends while a call is still out (a peer that never answers): the runtime
    // marks the end, then drops the call, which is recorded as abandoned.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let arguments = json!({"path": "q3-report.md", "peer": silent.local_addr()?.to_string()});
    let mut pending = Box::pin(reporter_tools.dispatch("share-file", arguments));
    if tokio::time::timeout(Duration::from_millis(200), &mut pending)
        .await
        .is_ok()
    {
        return Err("a peer that never answers cannot finish a share".into());
    }
    reporter.capsule.tools().mark_session_ended();
    drop(pending);
    let events = reporter.trace.events();
    let reason = events
        .last()
        .and_then(|line| line["reason"].as_str())
        .unwrap_or_default()
        .to_owned();
    println!("a call dropped after the session ended: {reason}");
    if !reason.starts_with("abandoned:") {
        return Err(format!("the dropped call is recorded as {reason:?}, not abandoned").into());
    }
    drop(silent);

    println!(
        "trace lines: reporter {}, reader {}",
        reporter.trace.lines().len(),
        reader.trace.lines().len()
    );
    stop.send_replace(true);
    for running in [reporter, reader] {
        running.served.await??;
        running.capsule.end_session();
    }
    Ok(())
}
