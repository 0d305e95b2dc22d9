//! The server of `amber bench oo7 --server`: `amber_server` in this
//! process, on a runtime thread of its own.

use std::path::Path;
use std::sync::mpsc;

use crate::oo1::BenchError;

/// A server in this process, on its own runtime thread.
pub(super) struct Served {
    pub(super) addr: std::net::SocketAddr,
    /// The database's writer: its log's end tells the bytes logged.
    pub(super) writer: Option<std::sync::Arc<amber_server::serve_write::Writer>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Served {
    pub(super) fn start(path: &Path, token: &str) -> Result<Served, BenchError> {
        let opts = amber_server::ServeOptions {
            listen: "127.0.0.1:0".parse().expect("an address"),
            databases: vec![("oo7".into(), path.to_path_buf())],
            token: Some(token.as_bytes().to_vec()),
            ..amber_server::ServeOptions::default()
        };
        let (addr_tx, addr_rx) = mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = match tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => return drop(addr_tx.send(Err(e.to_string()))),
            };
            rt.block_on(async move {
                match amber_server::bind(opts).await {
                    Ok(server) => {
                        let _ = addr_tx.send(Ok((server.local_addr(), server.writer("oo7"))));
                        server.run(async { drop(stopped.await) }).await;
                    }
                    Err(e) => drop(addr_tx.send(Err(e.to_string()))),
                }
            });
        });
        let (addr, writer) = (addr_rx
            .recv()
            .unwrap_or_else(|_| Err("the server thread ended".into())))
        .map_err(|m| BenchError::Child {
            engine: "amber serve".into(),
            job: "starting".into(),
            message: m,
        })?;
        Ok(Served {
            addr,
            writer,
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // Let go first, so that the server closes (checkpoints) it.
        self.writer = None;
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
