//! A fault's cluster from the server: one `ReadCluster`, or, when the
//! server refuses the window as more than one answer may carry, its
//! halves; later windows are then asked for in pieces of the size that
//! was sent.

use super::{Remote, remote, server_error, unexpected};
use crate::source::Source;
use crate::error::Result;
use crate::format::PageNo;
use crate::store::ClusterBlock;
use crate::wire::{self, ErrorCode, Request, Response};
use std::ops::Range;
use std::sync::atomic::Ordering;

/// What a `ReadCluster` was answered with.
enum ClusterAnswer {
    /// The blocks listed, their images in the body at `data`, which
    /// starts at `start` in the buffer.
    Listed(Vec<wire::WireBlock>, Range<usize>, usize),
    /// `TooLarge`: the images are more than one answer may carry.
    TooLarge(String),
}

impl Remote {
    /// The blocks that start in `from..from + pages`, their images
    /// appended to `buf`, into `out`. A window the server refuses as too
    /// large for one answer (a server whose connections have little
    /// memory: `--max-buffered`) is asked for in halves, down to one page.
    pub(super) fn cluster_after(
        &self,
        from: PageNo,
        pages: u64,
        buf: &mut Vec<u8>,
        out: &mut Vec<ClusterBlock>,
    ) -> Result<()> {
        let cap = self.window_cap.load(Ordering::Relaxed).max(1);
        if pages > cap {
            let mut at = from;
            while at < from + pages {
                let n = cap.min(from + pages - at);
                self.cluster_after(at, n, buf, out)?;
                at += n;
            }
            return Ok(());
        }
        let answer = {
            let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
            let req = Request::ReadCluster { from, pages };
            let at = conn.exchange_after(&self.url, self.max_frame, &req, buf)?;
            let body = &buf[at.clone()];
            match Response::decode_cluster(body) {
                Some(Ok((blocks, data))) => ClusterAnswer::Listed(blocks, data, at.start),
                Some(Err(e)) => return Err(conn.broken_by(&self.url, e)),
                None => {
                    let answer = Response::decode(body);
                    buf.truncate(at.start);
                    match answer {
                        Ok(Response::Error {
                            code: ErrorCode::TooLarge,
                            message,
                        }) => ClusterAnswer::TooLarge(message),
                        Ok(Response::Error { code, message }) => {
                            return Err(server_error(&self.url, code, message));
                        }
                        Ok(other) => return Err(unexpected(&self.url, "ReadCluster", &other)),
                        Err(e) => return Err(conn.broken_by(&self.url, e)),
                    }
                }
            }
        };
        let (blocks, data, start) = match answer {
            ClusterAnswer::Listed(blocks, data, start) => (blocks, data, start),
            ClusterAnswer::TooLarge(_) if pages > 1 => {
                let half = pages / 2;
                self.window_cap.fetch_min(half, Ordering::Relaxed);
                self.cluster_after(from, half, buf, out)?;
                return self.cluster_after(from + half, pages - half, buf, out);
            }
            // One block, too large for the server to send: its entry says
            // so (and has no image), and only its own fault fails.
            ClusterAnswer::TooLarge(message) => {
                let error = || server_error(&self.url, ErrorCode::TooLarge, message.clone());
                let Some(&(head, pages)) = self.blocks_starting_in(from, 1)?.first() else {
                    return Err(error());
                };
                out.push(ClusterBlock {
                    head,
                    pages,
                    at: buf.len(),
                    image: Err(error()),
                });
                return Ok(());
            }
        };
        let ps = self.page_size as u64;
        for b in blocks {
            let fits = b
                .at
                .checked_add(u64::from(b.pages) * ps)
                .is_some_and(|end| end <= data.len() as u64);
            if b.pages == 0 || !fits || b.head < from || b.head >= from.saturating_add(pages) {
                return Err(remote(
                    &self.url,
                    format!("its cluster lists block {} outside what it sent", b.head),
                ));
            }
            out.push(ClusterBlock {
                head: b.head,
                pages: b.pages,
                at: start + data.start + b.at as usize,
                image: match b.error {
                    None => Ok(()),
                    Some((code, message)) => Err(server_error(&self.url, code, message)),
                },
            });
        }
        Ok(())
    }
}

