//! Work handed on to run later, maybe on another thread: a scenario's
//! teardown moves to a task of its own, carrying what still has to be
//! awaited (a socket's stop, a driver's last wait).
use std::future::Future;

use futures::future::BoxFuture;

/// A future awaited once, by whoever holds it last. Shareable between
/// threads although the future is only `Send`: the mutex is never locked,
/// only taken apart.
pub struct Later<T>(std::sync::Mutex<BoxFuture<'static, T>>);

impl<T> Later<T> {
    pub fn new(work: impl Future<Output = T> + Send + 'static) -> Self {
        Self(std::sync::Mutex::new(Box::pin(work)))
    }

    pub fn from_boxed(work: BoxFuture<'static, T>) -> Self {
        Self(std::sync::Mutex::new(work))
    }

    pub async fn run(self) -> T {
        self.0.into_inner().unwrap_or_else(|p| p.into_inner()).await
    }
}

#[cfg(test)]
mod tests {
    use super::Later;

    fn shareable<T: Send + Sync>(_: &T) {}

    #[tokio::test]
    async fn runs_its_work_once_awaited_on_another_task() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let later = Later::new(async move {
            let _ = tx.send(());
            7
        });
        shareable(&later);
        let got = tokio::spawn(later.run()).await.expect("the task ran");
        assert_eq!(got, 7);
        assert!(rx.await.is_ok(), "the work ran");
    }
}
