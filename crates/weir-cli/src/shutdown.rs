//! The signals that stop a long-running command (`weir hub`, `weir agent`).

use std::future::Future;

/// Registers for Ctrl-C and, on Unix, SIGTERM (what systemd and Kubernetes send) at once, and
/// returns a future that ends when either arrives. Registering before the command says it is
/// up means a signal sent right after that is handled, never met by the default action.
///
/// Must be called inside the tokio runtime.
pub(crate) fn shutdown_signal() -> impl Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let registered = signal(SignalKind::terminate())
            .and_then(|term| Ok((term, signal(SignalKind::interrupt())?)));
        async move {
            match registered {
                Ok((mut term, mut interrupt)) => {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = interrupt.recv() => {}
                    }
                }
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
