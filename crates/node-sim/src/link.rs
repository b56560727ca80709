//! The simulated node's network link to the API server, which a scenario
//! can cut and restore (a node lost and back).
//!
//! Every request the simulated kubelet makes goes through
//! [`Link::client`]. While the link is cut, what a cut cable does to a
//! real kubelet is done to it: requests do not go out (they wait), and the
//! answers and watch streams already open stop arriving (they wait too).
//! Nothing fails: a cut short of TCP's retransmission timeout (minutes)
//! only delays a real kubelet's packets, which arrive once the cable is
//! back. So the node's Lease is not renewed, its pods' statuses are not
//! written, and it does not see what happens to its pods meanwhile (a pod
//! deleted while the node is away is still running there); once restored,
//! all of it goes on where it stopped. The node lifecycle controller sees a
//! Lease not renewed: the Node's Ready condition becomes `Unknown` and the
//! `node.kubernetes.io/unreachable` taints follow, as for a real node.
//!
//! The kubelet's own unix sockets (plugin registration, DRA calls) are on
//! the node and are not cut.
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response};
use kube::client::Body;
use tokio::sync::watch;

/// The switch of one node's link: `true` while it is cut.
#[derive(Debug, Clone)]
pub struct Link {
    cut: watch::Sender<bool>,
}

impl Default for Link {
    fn default() -> Self {
        Self::new()
    }
}

impl Link {
    /// A link that is up.
    pub fn new() -> Self {
        Self {
            cut: watch::Sender::new(false),
        }
    }

    /// Cuts (`true`) or restores (`false`) the link; returns whether that
    /// changed anything.
    pub fn set_cut(&self, cut: bool) -> bool {
        self.cut
            .send_if_modified(|c| std::mem::replace(c, cut) != cut)
    }

    pub fn is_cut(&self) -> bool {
        *self.cut.borrow()
    }

    /// `client` with its requests and answers going through this link.
    pub fn client(&self, client: kube::Client) -> kube::Client {
        let namespace = client.default_namespace().to_owned();
        let link = self.cut.subscribe();
        let service = tower::service_fn(move |request: Request<Body>| {
            let client = client.clone();
            let mut link = link.clone();
            async move {
                // A request waits for the cable before it goes out…
                let _ = link.wait_for(|cut| !*cut).await;
                let response = client.send(request).await?;
                let (parts, body) = response.into_parts();
                // …and its answer, streamed, stops while the cable is cut.
                Ok::<_, kube::Error>(Response::from_parts(
                    parts,
                    Held {
                        body,
                        link,
                        waiting: None,
                    },
                ))
            }
        });
        kube::Client::new(service, namespace)
    }
}

/// A wait until the link is up again.
type Restored = Pin<Box<dyn Future<Output = ()> + Send>>;

/// An answer's body that delivers nothing while the link is cut.
struct Held {
    body: Body,
    link: watch::Receiver<bool>,
    waiting: Option<Restored>,
}

impl http_body::Body for Held {
    type Data = bytes::Bytes;
    type Error = kube::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        loop {
            if let Some(restored) = self.waiting.as_mut() {
                match restored.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(()) => self.waiting = None,
                }
            }
            if *self.link.borrow() {
                let mut link = self.link.clone();
                self.waiting = Some(Box::pin(async move {
                    let _ = link.wait_for(|cut| !*cut).await;
                }));
                continue;
            }
            return Pin::new(&mut self.body).poll_frame(cx);
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_cut_says_whether_it_changed() {
        let link = Link::new();
        assert!(!link.is_cut());
        assert!(link.set_cut(true));
        assert!(!link.set_cut(true));
        assert!(link.is_cut());
        assert!(link.set_cut(false));
        assert!(!link.is_cut());
    }
}
