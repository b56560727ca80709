//! What a step runs within: the run's step timeout and interrupt, and the
//! scenario's drivers breaking. A step that waits on a pod whose driver's
//! agent died would otherwise sit out its whole timeout; here it ends at
//! once with the reason, and a step cut by its timeout says what its
//! innermost wait last saw.
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::driver::sockets::Broken;
use dra_e2e_kube::wait;

/// What [`run`] races a step against: the scenario's drivers breaking. The
/// scenario adds each driver it hosts once the driver is set up (the steps'
/// `World::add_driver_on`), so every later step fails as soon as one of
/// its drivers breaks, with the reason, instead of running into a timeout.
#[derive(Clone, Default)]
pub struct Watched {
    signals: Arc<std::sync::Mutex<Vec<Broken>>>,
    added: Arc<tokio::sync::Notify>,
}

impl std::fmt::Debug for Watched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.signals.lock().unwrap_or_else(|e| e.into_inner()).len();
        write!(f, "Watched({n} signal(s))")
    }
}

impl Watched {
    pub fn add(&self, signals: impl Iterator<Item = Broken>) {
        let mut list = self.signals.lock().unwrap_or_else(|e| e.into_inner());
        let before = list.len();
        for s in signals {
            if !list.iter().any(|known| known.same(&s)) {
                list.push(s);
            }
        }
        if list.len() > before {
            self.added.notify_one();
        }
    }

    /// Resolves with the first reason any watched signal reports.
    async fn first_broken(&self) -> String {
        loop {
            let added = self.added.notified();
            tokio::pin!(added);
            added.as_mut().enable();
            let list = self
                .signals
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            if let Some(reason) = list.iter().find_map(Broken::reason) {
                return reason;
            }
            if list.is_empty() {
                added.await;
                continue;
            }
            let any = futures::future::select_all(list.iter().map(|b| Box::pin(b.wait())));
            tokio::select! {
                (reason, _, _) = any => return reason,
                _ = added => {}
            }
        }
    }
}

/// What a step runs within: the run's step timeout and interrupt, and the
/// scenario's drivers breaking.
pub struct StepBounds {
    pub step_timeout: Duration,
    pub interrupt: CancellationToken,
    pub broken: Watched,
    /// What a failed pod wait adds of the drivers the runner hosts or
    /// interposes (their failed prepare calls).
    pub driver_notes: Option<dra_e2e_kube::wait::diagnose::DriverNotes>,
}

impl StepBounds {
    /// A step timeout and an interrupt alone: no driver watched yet, nothing
    /// to say of drivers.
    pub fn within(step_timeout: Duration, interrupt: CancellationToken) -> Self {
        StepBounds {
            step_timeout,
            interrupt,
            broken: Watched::default(),
            driver_notes: None,
        }
    }
}

/// How a step ended other than with its value.
#[derive(Debug)]
pub enum Ended<E> {
    /// The step's own error.
    Failed(E),
    /// The step was cut: its timeout, the run's interrupt or a driver of the
    /// scenario breaking, said as the report says it.
    Cut(String),
}

/// Runs a step body within `bounds`. A driver of the scenario that breaks
/// meanwhile (a proxy agent died) ends the step at once with the reason.
pub async fn run<T, E>(
    bounds: StepBounds,
    fut: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, Ended<E>> {
    let StepBounds {
        step_timeout,
        interrupt,
        broken: watched,
        driver_notes,
    } = bounds;
    if interrupt.is_cancelled() {
        return Err(Ended::Cut(
            "the run was interrupted; not starting this step".to_owned(),
        ));
    }
    let progress = driver_notes
        .map(wait::Progress::with_driver_notes)
        .unwrap_or_default();
    let fut = wait::with_progress(progress.clone(), fut);
    tokio::select! {
        r = tokio::time::timeout(step_timeout, fut) => match r {
            Ok(r) => r.map_err(Ended::Failed),
            // A pod wait cut short says what the cluster says about its pod.
            Err(_) => Err(Ended::Cut(format!(
                "the step did not finish within --step-timeout {}{}{}",
                humantime::format_duration(step_timeout),
                progress.last().map(|p| format!(" ({p})")).unwrap_or_default(),
                progress.diagnosis().await.map(|d| format!("\n{d}")).unwrap_or_default()
            ))),
        },
        reason = watched.first_broken() => Err(Ended::Cut(format!(
            "{reason}{}",
            progress.last().map(|p| format!(" (the step was {p})")).unwrap_or_default()
        ))),
        _ = interrupt.cancelled() => Err(Ended::Cut(
            "the run was interrupted (Ctrl-C or --deadline)".to_owned(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::sockets::BrokenSender;

    fn bounds() -> StepBounds {
        StepBounds::within(Duration::from_secs(10), CancellationToken::new())
    }

    /// The message of a step that did not end with its value.
    async fn message<T: std::fmt::Debug>(
        r: impl std::future::Future<Output = Result<T, Ended<String>>>,
    ) -> String {
        match r.await {
            Err(Ended::Failed(e)) | Err(Ended::Cut(e)) => e,
            Ok(v) => panic!("expected an end, got {v:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_step_ends_with_its_body_or_its_timeout() {
        assert!(matches!(
            run(bounds(), async { Ok::<_, String>(7) }).await,
            Ok(7)
        ));
        let e = message(run::<(), _>(bounds(), async { Err("no".to_owned()) })).await;
        assert_eq!(e, "no");
        let e = message(run::<(), String>(bounds(), std::future::pending())).await;
        assert!(
            e.starts_with("the step did not finish within --step-timeout 10s"),
            "{e}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_driver_that_breaks_ends_the_step_with_the_reason() {
        let b = bounds();
        let watched = b.broken.clone();
        let sender = BrokenSender::default();
        let step = message(run::<(), String>(b, std::future::pending()));
        let breaks = async {
            // Added while the step runs, as a step that adds a driver does.
            tokio::time::sleep(Duration::from_secs(1)).await;
            watched.add(std::iter::once(sender.subscribe()));
            tokio::time::sleep(Duration::from_secs(1)).await;
            sender.report("the agent on node n died".to_owned());
        };
        let (e, ()) = tokio::join!(step, breaks);
        assert_eq!(e, "the agent on node n died");
        // A later step of the scenario that waits fails at once too.
        let b = StepBounds {
            broken: watched,
            ..bounds()
        };
        let started = tokio::time::Instant::now();
        let e = message(run::<(), String>(b, std::future::pending())).await;
        assert_eq!(e, "the agent on node n died");
        assert_eq!(started.elapsed(), Duration::ZERO);
    }

    #[tokio::test]
    async fn an_interrupted_run_starts_no_step() {
        let b = bounds();
        b.interrupt.cancel();
        let e = message(run::<(), String>(b, async { Ok(()) })).await;
        assert_eq!(e, "the run was interrupted; not starting this step");
    }
}
