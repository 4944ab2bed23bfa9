//! How a pull is asked to stop: SIGINT and SIGTERM, counted.
//!
//! A one-off pull aborts at the first signal: the download in flight is dropped (its temporary
//! file removed) and the run exits with the shell's status for the signal (130, 143). A watching
//! pull winds down at the first signal (no new file is started, the one in flight finishes) and
//! aborts its downloads at the second. [`Stop`] carries both levels; the code that waits checks
//! the level it honours.

use std::sync::Arc;
use tokio::sync::watch;

/// The signal that asked a pull to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    /// SIGINT (2).
    Interrupt,
    /// SIGTERM (15).
    Terminate,
}

impl Signal {
    /// The shell's exit status for a process ended by this signal: 128 + its number.
    pub(crate) fn exit_status(self) -> u8 {
        match self {
            Signal::Interrupt => 130,
            Signal::Terminate => 143,
        }
    }

    /// Its name, for messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
        }
    }
}

/// How far a stop has gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    /// Nothing asked.
    Running,
    /// Start no new file; let the ones in flight end.
    WindDown,
    /// Drop the downloads in flight (their temporary files go with them).
    Abort,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct State {
    level: Level,
    first: Option<Signal>,
}

/// A stop request shared by everything a run does; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Stop {
    state: watch::Receiver<State>,
    /// Kept so the receiver never sees the channel closed.
    _sender: Arc<watch::Sender<State>>,
}

/// What the first signal does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FirstSignal {
    /// Abort at once (a one-off pull).
    Aborts,
    /// Wind down; a second signal aborts (a watching pull).
    WindsDown,
}

impl Stop {
    /// Listens for SIGINT and SIGTERM from now on (their default action, ending the process,
    /// no longer applies).
    ///
    /// # Errors
    /// The OS error when a signal handler cannot be installed.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub(crate) fn on_signals(first: FirstSignal) -> std::io::Result<Stop> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut int = signal(SignalKind::interrupt())?;
        let mut term = signal(SignalKind::terminate())?;
        let (stop, sender) = Stop::new();
        tokio::spawn(async move {
            loop {
                let signal = tokio::select! {
                    Some(()) = int.recv() => Signal::Interrupt,
                    Some(()) = term.recv() => Signal::Terminate,
                    else => return,
                };
                sender.send_modify(|state| state.advance(signal, first));
            }
        });
        Ok(stop)
    }

    fn new() -> (Stop, Arc<watch::Sender<State>>) {
        let (sender, state) = watch::channel(State {
            level: Level::Running,
            first: None,
        });
        let sender = Arc::new(sender);
        (
            Stop {
                state,
                _sender: sender.clone(),
            },
            sender,
        )
    }

    /// A stop no signal reaches, with a handle to raise it by hand (tests).
    #[cfg(test)]
    pub(crate) fn manual(first: FirstSignal) -> (Stop, impl Fn(Signal)) {
        let (stop, sender) = Stop::new();
        (stop, move |signal| {
            sender.send_modify(|state| state.advance(signal, first));
        })
    }

    /// Whether no new file may be started.
    pub(crate) fn winding_down(&self) -> bool {
        self.state.borrow().level >= Level::WindDown
    }

    /// The signal that first asked to stop, if any has.
    pub(crate) fn signal(&self) -> Option<Signal> {
        self.state.borrow().first
    }

    /// Resolves once no new file may be started.
    pub(crate) async fn wound_down(&self) {
        self.reached(Level::WindDown).await;
    }

    /// Resolves once the downloads in flight must be dropped.
    pub(crate) async fn aborted(&self) {
        self.reached(Level::Abort).await;
    }

    async fn reached(&self, level: Level) {
        let mut state = self.state.clone();
        // The sender lives as long as any `Stop`, so the wait ends only when the level comes.
        let _ = state.wait_for(|s| s.level >= level).await;
    }
}

impl State {
    fn advance(&mut self, signal: Signal, first: FirstSignal) {
        self.first.get_or_insert(signal);
        self.level = match (self.level, first) {
            (Level::Running, FirstSignal::WindsDown) => Level::WindDown,
            _ => Level::Abort,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn settles(f: impl std::future::Future<Output = ()>) -> bool {
        tokio::time::timeout(Duration::from_millis(50), f)
            .await
            .is_ok()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_one_off_pull_aborts_at_the_first_signal() {
        let (stop, raise) = Stop::manual(FirstSignal::Aborts);
        assert!(!stop.winding_down() && stop.signal().is_none());
        assert!(!settles(stop.wound_down()).await);
        raise(Signal::Terminate);
        assert!(stop.winding_down());
        assert!(settles(stop.aborted()).await);
        raise(Signal::Interrupt);
        assert_eq!(
            stop.signal(),
            Some(Signal::Terminate),
            "the first one counts"
        );
        assert_eq!(Signal::Terminate.exit_status(), 143);
        assert_eq!(Signal::Interrupt.exit_status(), 130);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_watch_winds_down_then_aborts_at_the_second() {
        let (stop, raise) = Stop::manual(FirstSignal::WindsDown);
        raise(Signal::Interrupt);
        assert!(settles(stop.wound_down()).await);
        assert!(!settles(stop.aborted()).await);
        raise(Signal::Interrupt);
        assert!(settles(stop.clone().aborted()).await);
        assert_eq!(stop.signal(), Some(Signal::Interrupt));
    }
}
