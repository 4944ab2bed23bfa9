#![allow(clippy::disallowed_methods)] // a test harness builds its world with std::fs
#![allow(dead_code)] // each test file uses a subset

//! The real binary: one scratch directory per test ([`Workdir`]), one way to start
//! `resource-plane` ([`Launch`]), either into a running process that printed its ready line
//! ([`Served`], killed and reaped on drop whatever the test did) or to its end ([`Exited`]).
//!
//! A process's stdout is read line by line on a thread (so a console answer or the ready line
//! can be awaited with a timeout), unless the launch holds it ([`Launch::hold_stdout`]): then
//! nothing reads past the ready line and the pipe fills. Its stderr is captured to a file by
//! default ([`Served::stderr`]), outside the workdir's tree so that [`Workdir::snapshot`] sees
//! only what the binary itself created.
//!
//! A launch through `bash` ([`Launch::shell`]) can give the process a resource limit or a
//! redirection first (`ulimit -n 48`, `2>/dev/full`).

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// The binary under test: this build's, or the one `RP_BIN` names (to show that a test fails
/// on an older build).
pub fn bin() -> String {
    std::env::var("RP_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_resource-plane").to_owned())
}

/// How long a launch may take to print its ready line, or a refused launch to exit.
pub const LAUNCH_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a console answer may take.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a graceful end (a signal, the end of stdin) may take: the contract says promptly.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------------------------------------
// The scratch directory.
// ---------------------------------------------------------------------------------------------

/// One test's scratch directory, canonical (so paths compare with what the binary prints):
///
/// - `wd/`: the workdir ([`Workdir::path`]);
/// - `manifest.yaml`: the manifest ([`Workdir::manifest`]);
/// - `tr/`: traces, outside the workdir ([`Workdir::trace`] is `tr/trace.jsonl`);
/// - `tmp/`: the child's `TMPDIR`;
/// - for tests running several capsules, `work-<label>/`, `manifests/<label>.yaml` and
///   `tr/trace-<label>.jsonl`.
///
/// Captured stderr goes to a second directory ([`Workdir::logs`]), so a snapshot of the
/// scratch directory sees only what the binary created.
pub struct Workdir {
    _dir: TempDir,
    root: PathBuf,
    logs: TempDir,
    launches: std::sync::atomic::AtomicUsize,
}

impl Workdir {
    /// A scratch directory whose manifest is `manifest`, with an empty workdir.
    pub fn new(manifest: &str) -> Self {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let root = std::fs::canonicalize(dir.path()).expect("a canonical scratch directory");
        for sub in ["wd", "tr", "tmp"] {
            std::fs::create_dir(root.join(sub)).expect("a scratch subdirectory");
        }
        std::fs::write(root.join("manifest.yaml"), manifest).expect("the manifest");
        Workdir {
            _dir: dir,
            root,
            logs: tempfile::tempdir().expect("a log directory"),
            launches: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The scratch directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `rel` under the scratch directory (not the workdir).
    pub fn at(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// The workdir, `wd/`.
    pub fn path(&self) -> PathBuf {
        self.root.join("wd")
    }

    pub fn manifest(&self) -> PathBuf {
        self.root.join("manifest.yaml")
    }

    /// Replaces the manifest.
    pub fn set_manifest(&self, manifest: &str) {
        std::fs::write(self.manifest(), manifest).expect("the manifest");
    }

    /// The default trace, `tr/trace.jsonl`.
    pub fn trace(&self) -> PathBuf {
        self.root.join("tr").join("trace.jsonl")
    }

    /// The child's `TMPDIR`, `tmp/`.
    pub fn tmpdir(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// Where captured stderr goes (outside the scratch directory).
    pub fn logs(&self) -> &Path {
        self.logs.path()
    }

    /// The stderr capture of the process labelled `label`.
    pub fn log_for(&self, label: &str) -> PathBuf {
        self.logs.path().join(format!("{label}.stderr"))
    }

    /// Writes `content` at `relative` under the workdir, making its directories.
    pub fn file(&self, relative: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.path().join(relative);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(&path, content).expect("write");
        path
    }

    /// Creates a symlink at `rel` (relative to the scratch directory) pointing at `target`.
    pub fn symlink(&self, target: impl AsRef<Path>, rel: &str) {
        std::os::unix::fs::symlink(target, self.root.join(rel)).expect("symlink");
    }

    /// A fresh, canonical workdir `work-<label>` for one of several capsules.
    pub fn workdir(&self, label: &str) -> PathBuf {
        let dir = self.root.join(format!("work-{label}"));
        std::fs::create_dir(&dir).expect("create a workdir");
        std::fs::canonicalize(&dir).expect("canonicalise a workdir")
    }

    /// Writes `manifests/<label>.yaml`.
    pub fn manifest_for(&self, label: &str, manifest: &str) -> PathBuf {
        let dir = self.root.join("manifests");
        std::fs::create_dir_all(&dir).expect("manifests/");
        let path = dir.join(format!("{label}.yaml"));
        std::fs::write(&path, manifest).expect("write a manifest");
        path
    }

    /// `tr/trace-<label>.jsonl`.
    pub fn trace_for(&self, label: &str) -> PathBuf {
        self.root.join("tr").join(format!("trace-{label}.jsonl"))
    }

    /// `serve --workdir wd --manifest manifest.yaml --trace tr/trace.jsonl`, then `extra`.
    pub fn args(&self, extra: &[&str]) -> Vec<String> {
        let mut args = self.args_without_trace(&[]);
        args.push("--trace".into());
        args.push(self.trace().display().to_string());
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        args
    }

    /// `serve --workdir wd --manifest manifest.yaml` (the default trace path), then `extra`.
    pub fn args_without_trace(&self, extra: &[&str]) -> Vec<String> {
        let mut args = vec![
            "serve".to_owned(),
            "--workdir".into(),
            self.path().display().to_string(),
            "--manifest".into(),
            self.manifest().display().to_string(),
        ];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        args
    }

    /// `check --manifest manifest.yaml`, then `extra`.
    pub fn check_args(&self, extra: &[&str]) -> Vec<String> {
        let mut args = vec![
            "check".to_owned(),
            "--manifest".into(),
            self.manifest().display().to_string(),
        ];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        args
    }

    /// A launch of the binary with `args`, its `TMPDIR` the scratch directory's `tmp/` and its
    /// stderr captured to a file of its own under [`Workdir::logs`] (`serve-<n>.stderr`).
    pub fn launch(&self, args: &[String]) -> Launch {
        let n = self
            .launches
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1;
        Launch::new(args)
            .env("TMPDIR", self.tmpdir())
            .stderr(Stderr::File(self.log_for(&format!("serve-{n}"))))
    }

    /// The default trace's lines, parsed (none when there is no trace yet).
    pub fn trace_lines(&self) -> Vec<Value> {
        if self.trace().exists() {
            read_trace(&self.trace())
        } else {
            Vec::new()
        }
    }

    /// Every path under the scratch directory with its type (and size or link target).
    pub fn snapshot(&self) -> BTreeMap<String, String> {
        snapshot_tree(&self.root, Leaf::Size)
    }

    /// Every trace under `tr/` and every captured stderr, sorted.
    pub fn logs_and_traces(&self) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for dir in [self.root.join("tr"), self.logs.path().to_owned()] {
            for entry in std::fs::read_dir(dir).expect("read a log or trace directory") {
                files.push(entry.expect("a directory entry").path());
            }
        }
        files.sort();
        files
    }
}

/// Every line of the trace at `path`, parsed; an unreadable trace or a line that is not JSON
/// fails the test.
pub fn read_trace(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("trace {} unreadable: {e}", path.display()));
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("trace line {} is not JSON ({e}): {line:?}", i + 1))
        })
        .collect()
}

/// Every file under `dir`, relative, sorted (symlinks reported, never followed).
pub fn tree(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("read_dir") {
            let entry = entry.expect("entry");
            let path = entry.path();
            let rel = path.strip_prefix(base).expect("under base");
            out.push(rel.display().to_string());
            if entry.file_type().expect("file type").is_dir() {
                walk(base, &path, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

// ---------------------------------------------------------------------------------------------
// Starting the binary.
// ---------------------------------------------------------------------------------------------

/// Where a started process's stderr goes.
#[derive(Debug, Clone)]
pub enum Stderr {
    /// The test's own stderr.
    Inherit,
    /// Nowhere.
    Null,
    /// A shell redirection appended to the command line (`2>/dev/full`); needs
    /// [`Launch::shell`] (any setup, even empty).
    Redirect(&'static str),
    /// A pipe whose reading end is closed at once: every write fails with `EPIPE`.
    ClosedPipe,
    /// A file, read back with [`Served::stderr`].
    File(PathBuf),
}

/// How to start the binary: its arguments and everything around them.
pub struct Launch {
    args: Vec<String>,
    label: String,
    shell: Option<String>,
    stdin: bool,
    stderr: Stderr,
    env: Vec<(String, Option<String>)>,
    hold_stdout: bool,
    run_timeout: Duration,
}

impl Launch {
    /// `BIN args`: stdin closed, stderr inherited, the log level and colour variables of the
    /// test's environment removed (so a developer's `RESOURCE_PLANE_LOG` changes nothing).
    pub fn new(args: &[String]) -> Self {
        Launch {
            args: args.to_vec(),
            label: "serve".into(),
            shell: None,
            stdin: false,
            stderr: Stderr::Inherit,
            env: vec![
                ("RESOURCE_PLANE_LOG".into(), None),
                ("NO_COLOR".into(), None),
            ],
            hold_stdout: false,
            run_timeout: LAUNCH_TIMEOUT,
        }
    }

    /// How long [`Launch::run`] waits for the end (default [`LAUNCH_TIMEOUT`]).
    pub fn within(mut self, timeout: Duration) -> Self {
        self.run_timeout = timeout;
        self
    }

    /// The name failures call the process by.
    pub fn label(mut self, label: &str) -> Self {
        label.clone_into(&mut self.label);
        self
    }

    /// Starts `bash -c "<setup>; exec BIN ARGS"` instead, so `setup` can set a limit or a trap.
    pub fn shell(mut self, setup: &str) -> Self {
        self.shell = Some(setup.to_owned());
        self
    }

    /// Keeps stdin open (a pipe the test writes: [`Served::send`]).
    pub fn stdin(mut self) -> Self {
        self.stdin = true;
        self
    }

    /// `--console` (added when the arguments lack it) with stdin kept open.
    pub fn console(mut self) -> Self {
        if !self.args.iter().any(|a| a == "--console") {
            self.args.push("--console".into());
        }
        self.stdin()
    }

    pub fn stderr(mut self, stderr: Stderr) -> Self {
        self.stderr = stderr;
        self
    }

    /// Sets `name` in the child's environment.
    pub fn env(mut self, name: &str, value: impl AsRef<std::ffi::OsStr>) -> Self {
        let value = value.as_ref().to_string_lossy().into_owned();
        self.env.retain(|(n, _)| n != name);
        self.env.push((name.to_owned(), Some(value)));
        self
    }

    /// `RESOURCE_PLANE_LOG=level`, or no such variable.
    pub fn log(self, level: Option<&str>) -> Self {
        match level {
            Some(level) => self.env("RESOURCE_PLANE_LOG", level),
            None => self,
        }
    }

    /// Reads nothing past the ready line: the stdout pipe fills as a reader that stopped would
    /// leave it.
    pub fn hold_stdout(mut self) -> Self {
        self.hold_stdout = true;
        self
    }

    fn command(&self) -> Command {
        let mut command = match &self.shell {
            Some(setup) => {
                let redirection = match &self.stderr {
                    Stderr::Redirect(redirection) => redirection,
                    _ => "",
                };
                let mut command = Command::new("bash");
                command
                    .arg("-c")
                    .arg(format!("{setup}\nexec \"$0\" \"$@\" {redirection}"))
                    .arg(bin())
                    .args(&self.args);
                command
            }
            None => {
                assert!(
                    !matches!(self.stderr, Stderr::Redirect(_)),
                    "a redirection needs a shell"
                );
                let mut command = Command::new(bin());
                command.args(&self.args);
                command
            }
        };
        for (name, value) in &self.env {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
        command.stderr(match &self.stderr {
            Stderr::Inherit | Stderr::Redirect(_) => Stdio::inherit(),
            Stderr::Null => Stdio::null(),
            Stderr::ClosedPipe => Stdio::piped(),
            Stderr::File(path) => {
                Stdio::from(std::fs::File::create(path).expect("create the stderr capture"))
            }
        });
        command
    }

    /// Starts the process and waits for its ready line (within [`LAUNCH_TIMEOUT`]), which must
    /// be JSON with `"event": "listening"`.
    pub fn start(self) -> Served {
        let mut child = self
            .command()
            .stdin(if self.stdin {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: spawn {}: {e}", self.label, bin()));
        // A closed pipe: the reading end goes now.
        drop(child.stderr.take());
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout");
        let (send, lines) = mpsc::channel();
        let hold = self.hold_stdout;
        std::thread::spawn(move || read_lines(stdout, &send, hold));
        let stderr = match &self.stderr {
            Stderr::File(path) => Some(path.clone()),
            _ => None,
        };
        let workdir = self
            .args
            .iter()
            .position(|a| a == "--workdir")
            .and_then(|at| self.args.get(at + 1))
            .map(PathBuf::from);
        let mut served = Served {
            workdir,
            label: self.label,
            child,
            stdin,
            lines,
            ready_line: String::new(),
            ready: Value::Null,
            stderr,
        };
        let first = match served.lines.recv_timeout(LAUNCH_TIMEOUT) {
            Ok(Out::Line(line)) => line,
            _ => {
                let status = served.wait(Duration::from_millis(200));
                panic!(
                    "{}: no ready line within {LAUNCH_TIMEOUT:?} (exit: {status:?}); stderr:\n{}",
                    served.label,
                    served.stderr()
                );
            }
        };
        served.ready = serde_json::from_str(&first).unwrap_or_else(|e| {
            panic!(
                "{}: the ready line is not JSON ({e}): {first:?}; stderr:\n{}",
                served.label,
                served.stderr()
            )
        });
        assert_eq!(
            served.ready["event"], "listening",
            "{}: ready line {first}",
            served.label
        );
        served.ready_line = first;
        served
    }

    /// Runs the process to its end (within [`Launch::within`], by default [`LAUNCH_TIMEOUT`])
    /// with stdout and stderr piped and read as they come.
    pub fn run(self) -> Exited {
        self.run_with_stdout(Stdio::piped())
    }

    /// [`Launch::run`] with `stdout` as the process's standard output (`stdout` in the result
    /// is empty unless it is piped). Stderr is piped whatever [`Launch::stderr`] said.
    pub fn run_with_stdout(self, stdout: Stdio) -> Exited {
        let mut child = Guard(
            self.command()
                .stdin(Stdio::null())
                .stdout(stdout)
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("{}: spawn {}: {e}", self.label, bin())),
        );
        let read = |pipe: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut text = String::new();
                if let Some(mut pipe) = pipe {
                    let _ = pipe.read_to_string(&mut text);
                }
                text
            })
        };
        let stdout = read(
            child
                .0
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        );
        let stderr = read(
            child
                .0
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        );
        let deadline = Instant::now() + self.run_timeout;
        let status = loop {
            if let Some(status) = child.0.try_wait().expect("try_wait") {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "{}: still running after {:?} ({:?})",
                self.label,
                self.run_timeout,
                self.args
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        Exited {
            status,
            code: status.code(),
            stdout: stdout.join().expect("the stdout reader"),
            stderr: stderr.join().expect("the stderr reader"),
        }
    }
}

/// What the stdout thread hands over: a line, or (holding) the unread rest of the pipe.
enum Out {
    Line(String),
    Held(BufReader<ChildStdout>),
}

fn read_lines(stdout: ChildStdout, send: &mpsc::Sender<Out>, hold: bool) {
    let mut reader = BufReader::new(stdout);
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.ends_with('\n') {
            line.pop();
            if line.ends_with('\r') {
                line.pop();
            }
        }
        if send.send(Out::Line(line)).is_err() {
            return;
        }
        if hold {
            // The reader lives on in the channel, unread, as long as the process's handle.
            let _ = send.send(Out::Held(reader));
            return;
        }
    }
}

/// Kills (SIGKILL) and reaps the child when dropped.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What a process that ran to its end left behind.
#[derive(Debug)]
pub struct Exited {
    pub status: ExitStatus,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

// ---------------------------------------------------------------------------------------------
// A running process.
// ---------------------------------------------------------------------------------------------

/// A running `resource-plane` that printed its ready line; killed and reaped when dropped.
pub struct Served {
    pub label: String,
    pub child: Child,
    /// Open with [`Launch::stdin`] or [`Launch::console`], until [`Served::close_stdin`].
    pub stdin: Option<ChildStdin>,
    lines: Receiver<Out>,
    /// The first stdout line, as printed.
    pub ready_line: String,
    /// The ready line, parsed.
    pub ready: Value,
    stderr: Option<PathBuf>,
    workdir: Option<PathBuf>,
}

impl Served {
    /// Starts `bash -c "<setup> exec BIN ARGS"` with `stderr`; `console` keeps stdin open.
    pub fn start(setup: &str, args: &[String], stderr: Stderr, console: bool) -> Served {
        let launch = Launch::new(args).shell(setup).stderr(stderr);
        if console {
            launch.stdin().start()
        } else {
            launch.start()
        }
    }

    /// A string field of the ready line.
    pub fn ready_str(&self, key: &str) -> &str {
        self.ready[key]
            .as_str()
            .unwrap_or_else(|| panic!("ready line field {key} is not a string: {}", self.ready))
    }

    pub fn url(&self) -> &str {
        self.ready_str("url")
    }

    pub fn audience(&self) -> &str {
        self.ready_str("audience")
    }

    pub fn session_id(&self) -> &str {
        self.ready_str("session_id")
    }

    /// The port of the ready line's url.
    pub fn port(&self) -> u16 {
        let url = self.url();
        url.rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{}: no port in url {url:?}", self.label))
    }

    /// `127.0.0.1:<port>`, the address peers use.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port())
    }

    /// The next stdout line within `timeout`.
    pub fn line(&self, timeout: Duration) -> Option<String> {
        match self.lines.recv_timeout(timeout) {
            Ok(Out::Line(line)) => Some(line),
            Ok(Out::Held(_)) | Err(_) => None,
        }
    }

    /// The next stdout line within [`ANSWER_TIMEOUT`]; its absence fails the test, with
    /// stderr when stdout closed.
    pub fn next_line(&self, what: &str) -> String {
        match self.lines.recv_timeout(ANSWER_TIMEOUT) {
            Ok(Out::Line(line)) => line,
            Ok(Out::Held(_)) => panic!("{}: stdout is held; no {what}", self.label),
            Err(RecvTimeoutError::Timeout) => {
                panic!("{}: no {what} within {ANSWER_TIMEOUT:?}", self.label)
            }
            Err(RecvTimeoutError::Disconnected) => panic!(
                "{}: stdout closed before {what}; stderr:\n{}",
                self.label,
                self.stderr()
            ),
        }
    }

    /// After exit: every stdout line that followed the ready line.
    pub fn remaining_stdout(&self) -> Vec<String> {
        let mut lines = Vec::new();
        while let Some(line) = self.line(ANSWER_TIMEOUT) {
            lines.push(line);
        }
        lines
    }

    /// Writes one console line.
    pub fn send(&mut self, line: &str) {
        self.send_bytes(format!("{line}\n").as_bytes());
    }

    /// Writes raw bytes to the console.
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("console stdin");
        stdin
            .write_all(bytes)
            .and_then(|()| stdin.flush())
            .expect("write console bytes");
    }

    /// Sends one console line and returns the one JSON answer.
    pub fn console(&mut self, line: &str) -> Value {
        self.send(line);
        let answer = self.next_line(&format!("console answer to {line:?}"));
        serde_json::from_str(&answer).unwrap_or_else(|e| {
            panic!(
                "{}: console answer to {line:?} is not JSON ({e}): {answer:?}",
                self.label
            )
        })
    }

    /// Sends one console request and returns the one JSON answer.
    pub fn request(&mut self, request: &Value) -> Value {
        self.console(&serde_json::to_string(request).expect("serialise a request"))
    }

    /// Calls a tool; returns the whole answer `{"ok":…}`.
    pub fn call(&mut self, tool: &str, input: Value) -> Value {
        self.request(&json!({"op": "call", "tool": tool, "input": input}))
    }

    /// Calls a tool that must succeed; returns its `result`.
    pub fn call_ok(&mut self, tool: &str, input: Value) -> Value {
        let answer = self.call(tool, input.clone());
        assert_eq!(
            answer["ok"], true,
            "{}: {tool} {input} should succeed, got {answer}",
            self.label
        );
        answer["result"].clone()
    }

    /// Calls a tool that must fail; returns its error code after checking the answer's shape
    /// (a message that holds no token, no `result`).
    pub fn call_err(&mut self, tool: &str, input: Value) -> String {
        let answer = self.call(tool, input.clone());
        assert_eq!(
            answer["ok"], false,
            "{}: {tool} {input} should fail, got {answer}",
            self.label
        );
        assert!(
            answer.get("result").is_none(),
            "{}: a refusal carries no result: {answer}",
            self.label
        );
        let message = answer["error"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("{}: error without message: {answer}", self.label));
        assert!(
            !message.contains("mh1."),
            "{}: an error message holds a token: {answer}",
            self.label
        );
        answer["error"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("{}: error without code: {answer}", self.label))
            .to_owned()
    }

    /// `task-complete`; returns the generation it reports.
    pub fn task_complete(&mut self) -> u64 {
        let answer = self.request(&json!({"op": "task-complete"}));
        assert_eq!(answer["ok"], true, "{}: task-complete {answer}", self.label);
        answer["result"]["generation"]
            .as_u64()
            .unwrap_or_else(|| panic!("{}: task-complete without generation", self.label))
    }

    /// Closes stdin (end of input for the console).
    pub fn close_stdin(&mut self) {
        drop(self.stdin.take());
    }

    /// Sends `signal`.
    pub fn signal(&self, signal: rustix::process::Signal) {
        rustix::process::kill_process(rustix::process::Pid::from_child(&self.child), signal)
            .expect("kill(2)");
    }

    /// Sends SIGTERM, ignoring a process already gone.
    pub fn terminate(&self) {
        let pid = rustix::process::Pid::from_child(&self.child);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }

    /// The exit status, if the process ends within `timeout`.
    pub fn wait(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The exit status within [`EXIT_TIMEOUT`]; a process still running fails the test.
    pub fn wait_exit(&mut self, after: &str) -> ExitStatus {
        self.wait(EXIT_TIMEOUT).unwrap_or_else(|| {
            panic!(
                "{}: still running {EXIT_TIMEOUT:?} after {after}; stderr:\n{}",
                self.label,
                self.stderr()
            )
        })
    }

    /// Requires exit status 0 within [`EXIT_TIMEOUT`].
    pub fn expect_clean_exit(&mut self, what: &str) {
        let status = self.wait(EXIT_TIMEOUT);
        assert!(
            status.is_some(),
            "{what}: the process did not exit within {EXIT_TIMEOUT:?}"
        );
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(0),
            "{what}: exit status {status:?}; stderr:\n{}",
            self.stderr()
        );
    }

    /// Sends `signal` and requires exit status 0 within [`EXIT_TIMEOUT`].
    pub fn stop_with(&mut self, signal: rustix::process::Signal, what: &str) {
        self.signal(signal);
        self.expect_clean_exit(what);
    }

    /// SIGTERM, then exit status 0; returns stderr.
    pub fn stop(mut self) -> String {
        self.stop_with(rustix::process::Signal::TERM, "SIGTERM");
        self.stderr()
    }

    /// The captured stderr so far (empty unless stderr goes to a file).
    pub fn stderr(&self) -> String {
        self.stderr
            .as_ref()
            .map(|path| std::fs::read_to_string(path).unwrap_or_default())
            .unwrap_or_default()
    }

    /// The `--workdir` it was started with.
    pub fn workdir(&self) -> PathBuf {
        self.workdir
            .clone()
            .unwrap_or_else(|| panic!("{}: started without --workdir", self.label))
    }

    /// The trace the ready line names.
    pub fn trace_path(&self) -> PathBuf {
        PathBuf::from(self.ready_str("trace"))
    }

    /// Every line of that trace, parsed (none when it does not exist yet).
    pub fn trace_lines(&self) -> Vec<Value> {
        let path = self.trace_path();
        if path.exists() {
            read_trace(&path)
        } else {
            Vec::new()
        }
    }

    /// The trace lines of `event_type`.
    pub fn events(&self, event_type: &str) -> Vec<Value> {
        self.trace_lines()
            .into_iter()
            .filter(|e| e["event_type"] == event_type)
            .collect()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What [`snapshot_tree`] records of a regular file.
#[derive(Clone, Copy)]
pub enum Leaf {
    /// Its size.
    Size,
    /// Its contents (lossy UTF-8).
    Contents,
}

/// Every path under `dir` with its type: a directory, a symlink and its target, or a file as
/// `leaf` says. A `dir` that does not exist is an empty tree.
pub fn snapshot_tree(dir: &Path, leaf: Leaf) -> BTreeMap<String, String> {
    fn walk(dir: &Path, base: &Path, leaf: Leaf, out: &mut BTreeMap<String, String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.expect("dir entry").path();
            let rel = path
                .strip_prefix(base)
                .expect("under base")
                .display()
                .to_string();
            let meta = std::fs::symlink_metadata(&path).expect("lstat");
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).expect("readlink");
                out.insert(rel, format!("link -> {}", target.display()));
            } else if meta.is_dir() {
                out.insert(rel, "dir".into());
                walk(&path, base, leaf, out);
            } else {
                let text = match leaf {
                    Leaf::Size => format!("file, {} bytes", meta.len()),
                    Leaf::Contents => {
                        let bytes = std::fs::read(&path).expect("read");
                        format!("file {}", String::from_utf8_lossy(&bytes))
                    }
                };
                out.insert(rel, text);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, leaf, &mut out);
    out
}
