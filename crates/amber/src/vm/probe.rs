//! The machine's own price of a cold page, measured where the unsafe code
//! lives: reading a page of a file through a mapping of it, which the
//! kernel serves from its page cache with a minor fault. Amber's fault
//! backends copy, check and swizzle each page in user space; this is the
//! limit a mapped read path would approach (`amber bench faults` reports
//! Amber's cold cost per page against it).

use super::sys::Mapping;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// Reads one byte of each page of a fresh read-only private mapping of
/// `file` (pages of `page_size` bytes), in the order `order` gives, and
/// returns the time the reads took. With `one_per_fault` the mapping is
/// advised `MADV_RANDOM` first, meant to turn off the kernel's fault-around
/// (that maps up to 16 neighbouring cached pages per fault); on Linux 6.18
/// it does not (the kernel still maps the page-cache folio, or 16 pages,
/// per fault: docs/design.md §4.3.1). Pages past the file's end are
/// refused (reading one through the mapping would be a SIGBUS).
pub fn mapped_read(
    file: &File,
    page_size: usize,
    order: &[u64],
    one_per_fault: bool,
) -> io::Result<Duration> {
    let len = usize::try_from(file.metadata()?.len())
        .map_err(|_| io::Error::other("the file is larger than the address space"))?;
    let pages = (len / page_size.max(1)) as u64;
    if let Some(&p) = order.iter().find(|&&p| p >= pages) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("page {p} is past the file's end ({pages} whole pages)"),
        ));
    }
    let m = Mapping::private_fd(len, libc::PROT_READ, file.as_raw_fd())?;
    if one_per_fault {
        super::sys::madvise(m.addr(), len, libc::MADV_RANDOM)?;
    }
    let mut sum = 0u8;
    let t = Instant::now();
    for &p in order {
        // SAFETY: `p` is below the file's page count, so the byte lies
        // inside the mapping and inside the file (no SIGBUS); the mapping is
        // read-only and private, alive until `m` drops below, and nothing
        // writes through it.
        let b = unsafe { std::ptr::read_volatile(m.ptr().add(p as usize * page_size)) };
        sum = sum.wrapping_add(b);
    }
    let elapsed = t.elapsed();
    std::hint::black_box(sum);
    Ok(elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_pages_asked_and_refuses_past_the_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, vec![1u8; 3 * 4096 + 100]).expect("write");
        let f = File::open(&path).expect("open");
        for one in [false, true] {
            mapped_read(&f, 4096, &[2, 0, 1], one).expect("three whole pages");
        }
        let e = mapped_read(&f, 4096, &[3], false).expect_err("page 3 is partial");
        assert!(e.to_string().contains("past the file's end"), "{e}");
    }
}
