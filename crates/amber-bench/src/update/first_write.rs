//! The first-write measurement: what the first store to a clean,
//! write-protected page costs (the method is in [`crate::update`]'s
//! documentation).

use std::hint::black_box;
use std::time::Instant;

use amber::PRef;

use super::report::FirstWrite;
use super::{TARGET_FIRST_WRITE_UFFD_US, UpdateConfig};
use crate::oo1::amber_engine::AmberOo1;
use crate::oo1::amber_engine::schema::Part;
use crate::storage::{BenchError, summarize};

/// Parts on `m` distinct pages (the first part of each page, in id order).
fn parts_on_distinct_pages(
    eng: &AmberOo1,
    parts: u32,
    m: usize,
) -> Result<Vec<PRef<Part>>, BenchError> {
    let shift = eng.db().page_size().trailing_zeros();
    let mut pages = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(m);
    for id in 1..=parts {
        if out.len() == m {
            break;
        }
        let p = eng
            .part(id)
            .map_err(|e| BenchError::new(format!("part {id}: {e}")))?;
        if pages.insert(p.addr() >> shift) {
            out.push(p);
        }
    }
    Ok(out)
}

/// The first-write measurement (see the [`crate::update`] documentation).
pub(super) fn first_write(
    cfg: &UpdateConfig,
    eng: &mut AmberOo1,
    backend: &str,
) -> Result<FirstWrite, BenchError> {
    let parts = parts_on_distinct_pages(eng, cfg.parts, cfg.pages)?;
    let m = parts.len().max(1);
    let db = eng.db_mut();
    let (mut first, mut second, mut cost) = (Vec::new(), Vec::new(), Vec::new());
    // The first round makes the pages resident and, by its commit, clean and
    // write-protected; it is not timed.
    for round in 0..=cfg.iters.max(1) {
        let mut tx = db.begin()?;
        let mut sum = 0i64;
        for &p in &parts {
            sum += i64::from(tx.get(p).x);
        }
        black_box(sum);
        let t0 = Instant::now();
        for &p in &parts {
            tx.get_mut(black_box(p)).x += 1;
        }
        let t1 = Instant::now();
        for &p in &parts {
            tx.get_mut(black_box(p)).x -= 1;
        }
        let t2 = Instant::now();
        tx.commit()?;
        if round > 0 {
            let (a, b) = (t1 - t0, t2 - t1);
            first.push(a.as_secs_f64() * 1e6 / m as f64);
            second.push(b.as_secs_f64() * 1e6 / m as f64);
            cost.push((a.as_secs_f64() - b.as_secs_f64()) * 1e6 / m as f64);
        }
    }
    let s = summarize(&cost);
    Ok(FirstWrite {
        backend: backend.to_string(),
        pages: parts.len(),
        rounds: cost.len(),
        first_write_us: s.median,
        first_write_us_summary: s,
        first_loop_us_per_page: summarize(&first).median,
        second_loop_us_per_page: summarize(&second).median,
        target_us: (backend == "uffd").then_some(TARGET_FIRST_WRITE_UFFD_US),
    })
}
