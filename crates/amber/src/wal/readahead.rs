//! Reading a file front to back through a few reused buffers, with the next
//! chunk read (and checked) on a helper thread while the caller works on the
//! current one.
//!
//! Why a thread: after a machine crash the log comes from the device, and
//! recovery's work on one chunk can overlap reading the next only if someone
//! else is waiting for it; on a warm cache the helper's copying and
//! checksumming run on the second core. Why a few reused buffers rather than
//! one the size of the file: fresh memory costs a page fault per page as the
//! read fills it, and a chunk that has just been read is still in the cache
//! when the caller looks at it.

use crate::vm::BigBuf;
use std::io;
use std::ops::ControlFlow;
use std::sync::mpsc;

/// The reading side: fills a buffer with the next chunk and says which part
/// of it the caller is to see.
pub(crate) trait Source: Send {
    /// Fills `buf` from the start with the next chunk. Returns a tag and a
    /// length when `buf[..len]` is to be handed to the caller with the tag.
    fn step(&mut self, buf: &mut [u8]) -> io::Result<Option<(u64, usize)>>;
    /// Whether everything has been read.
    fn done(&self) -> bool;
}

/// Buffers in flight: one being filled, one ready, one being consumed.
const BUFFERS: usize = 3;

/// Runs `source` to its end with `buf_len`-byte buffers, calling `consume`
/// with what it hands over, in order, on the calling thread; on a helper
/// thread when `threaded` and the machine has more than one CPU. After
/// `consume` breaks it is not called again, but `source` still runs to its
/// end. Returns the source, or the first error of a step (after which no
/// step runs).
pub(crate) fn run<S: Source>(
    mut source: S,
    buf_len: usize,
    threaded: bool,
    consume: &mut dyn FnMut(u64, &[u8]) -> ControlFlow<()>,
) -> io::Result<S> {
    let parallel = threaded && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
    if parallel && let Some(result) = on_a_thread(&mut source, buf_len, consume) {
        return result.map(|()| source);
    }
    let mut buf = buffer(buf_len)?;
    let mut stopped = false;
    while !source.done() {
        if let Some((tag, len)) = source.step(&mut buf)?
            && !stopped
        {
            stopped = consume(tag, &buf[..len]).is_break();
        }
    }
    Ok(source)
}

/// What the helper thread sends: a filled buffer, its tag and the length to
/// hand over, or the error that stopped it.
type Filled = io::Result<(BigBuf, u64, usize)>;

/// A buffer of `len` bytes. Huge pages where the system has them: a few
/// faults for a buffer of a few MiB rather than one per 4 KiB.
fn buffer(len: usize) -> io::Result<BigBuf> {
    BigBuf::new(len).ok_or_else(|| io::Error::other("cannot map a read-ahead buffer"))
}

/// The threaded form of [`run`]; `None` if no thread could be started
/// (nothing has been read then).
fn on_a_thread<S: Source>(
    source: &mut S,
    buf_len: usize,
    consume: &mut dyn FnMut(u64, &[u8]) -> ControlFlow<()>,
) -> Option<io::Result<()>> {
    std::thread::scope(|s| {
        // Made inside the scope, so that if `consume` panics the channels
        // close as the panic unwinds and the helper stops instead of waiting
        // for buffers forever.
        let (full_tx, full_rx) = mpsc::sync_channel::<Filled>(BUFFERS);
        let (free_tx, free_rx) = mpsc::channel::<BigBuf>();
        let helper = std::thread::Builder::new()
            .name("amber-readahead".into())
            .spawn_scoped(s, move || {
                let mut made = 0;
                let mut spare: Option<BigBuf> = None;
                while !source.done() {
                    let mut buf = match spare.take() {
                        Some(b) => b,
                        None if made < BUFFERS => {
                            made += 1;
                            match buffer(buf_len) {
                                Ok(b) => b,
                                Err(e) => {
                                    let _ = full_tx.send(Err(e));
                                    return;
                                }
                            }
                        }
                        None => match free_rx.recv() {
                            Ok(b) => b,
                            Err(_) => return,
                        },
                    };
                    match source.step(&mut buf) {
                        Ok(Some((tag, len))) => {
                            if full_tx.send(Ok((buf, tag, len))).is_err() {
                                return;
                            }
                        }
                        Ok(None) => spare = Some(buf),
                        Err(e) => {
                            let _ = full_tx.send(Err(e));
                            return;
                        }
                    }
                }
            })
            .ok()?;
        let mut result = Ok(());
        let mut stopped = false;
        for filled in full_rx {
            match filled {
                Ok((buf, tag, len)) => {
                    if !stopped {
                        stopped = consume(tag, &buf[..len]).is_break();
                    }
                    let _ = free_tx.send(buf);
                }
                Err(e) => result = Err(e),
            }
        }
        if helper.join().is_err() {
            result = Err(io::Error::other("the read-ahead thread panicked"));
        }
        Some(result)
    })
}
