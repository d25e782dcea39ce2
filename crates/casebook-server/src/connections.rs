//! The accept loop: HTTP/1 connections served by hyper with a timeout on reading a request's
//! head and a cap on the connections one client address holds open, and a graceful end.
//!
//! `axum::serve` has neither limit: twenty thousand half-sent requests from one address used up
//! the server's files, and then no one, `/healthz` included, was answered.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioIo, TokioTimer};
use tower::Service;

/// Connections open per client address.
#[derive(Default)]
struct Open(Mutex<HashMap<IpAddr, usize>>);

/// One connection counted against its address; uncounted when dropped, however it ends.
struct Slot {
    open: Arc<Open>,
    address: IpAddr,
}

impl Open {
    /// A slot for one more connection from `address`, unless it already holds `most`.
    fn take(self: &Arc<Self>, address: IpAddr, most: usize) -> Option<Slot> {
        let mut open = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = open.entry(address).or_insert(0);
        if *count >= most {
            return None;
        }
        *count += 1;
        Some(Slot { open: self.clone(), address })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.open.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.address);
            }
        }
    }
}

/// See [`crate::serve`]: `header_read` and `most` are [`crate::Limits::header_read`] and
/// [`crate::Limits::max_connections_per_client`].
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    header_read: Duration,
    most: usize,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(header_read);
    let most = most.max(1);
    let open = Arc::new(Open::default());
    // Told to every connection when the server stops; each holds a `done` sender, so the
    // receiver ends when the last connection has.
    let (stopping, stop) = tokio::sync::watch::channel(());
    let (done, mut all_done) = tokio::sync::mpsc::channel::<()>(1);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(err) if is_of_one_connection(&err) => continue,
            Err(err) => {
                // Out of files, most likely: wait for some connections to close, not spin.
                tracing::warn!(error = %err, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(slot) = open.take(peer.ip(), most) else {
            tracing::debug!(client = %peer.ip(), "too many connections from one address: closed");
            drop(stream);
            continue;
        };
        let router = router.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            // A `Router` is always ready: no `poll_ready` needed before `call`.
            router.clone().call(request.map(axum::body::Body::new))
        });
        let connection = http.serve_connection(TokioIo::new(stream), service);
        let mut stop = stop.clone();
        let done = done.clone();
        tokio::spawn(async move {
            let mut connection = std::pin::pin!(connection);
            let mut stopping = false;
            loop {
                tokio::select! {
                    // Errors here are the client's (gone, or too slow with its head).
                    _ = connection.as_mut() => break,
                    _ = stop.changed(), if !stopping => {
                        stopping = true;
                        connection.as_mut().graceful_shutdown();
                    }
                }
            }
            drop((slot, done));
        });
    }
    drop(listener);
    drop(stopping);
    drop(done);
    let _ = all_done.recv().await;
    Ok(())
}

/// Whether an accept error concerns only the connection being accepted (the client gave up),
/// not the listener.
fn is_of_one_connection(err: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(err.kind(), ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset)
}
