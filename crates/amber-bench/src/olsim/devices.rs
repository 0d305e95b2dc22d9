//! Present-day devices for the experiments beyond the paper, with the
//! source of every parameter (data sheets as stored in the search corpus;
//! where a data sheet is silent the value is an assumption, said so).

use super::disk::{Flash, Geometry, SeekCurve};

/// Fits the two-regime seek curve to a data sheet's three points: the
/// single-track seek (`d = 1`), the full-stroke seek (`d = cylinders − 1`)
/// and the average seek as data sheets define it (weighted by `max + 1 − n`
/// over all seek lengths `n ≥ 1`), with the regimes meeting at `boundary`.
/// Four linear equations in `short_a, short_b, long_a, long_b`.
pub fn fit_seek(single: f64, average: f64, full: f64, cylinders: u32, boundary: u32) -> SeekCurve {
    let max = f64::from(cylinders - 1);
    // Σ w(n)·f(n) / Σ w(n) for the basis functions of each coefficient.
    let (mut w_sum, mut s1, mut ssq, mut l1, mut ld) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for n in 1..cylinders {
        let w = max + 1.0 - f64::from(n);
        w_sum += w;
        if n < boundary {
            s1 += w;
            ssq += w * f64::from(n).sqrt();
        } else {
            l1 += w;
            ld += w * f64::from(n);
        }
    }
    let b = f64::from(boundary);
    let mut m = [
        [1.0, 1.0, 0.0, 0.0, single],
        [0.0, 0.0, 1.0, max, full],
        [s1 / w_sum, ssq / w_sum, l1 / w_sum, ld / w_sum, average],
        [1.0, b.sqrt(), -1.0, -b, 0.0],
    ];
    // Gaussian elimination with partial pivoting.
    for col in 0..4 {
        let pivot = (col..4)
            .max_by(|&i, &j| m[i][col].abs().total_cmp(&m[j][col].abs()))
            .unwrap_or(col);
        m.swap(col, pivot);
        let pivot_row = m[col];
        for (row, r) in m.iter_mut().enumerate() {
            if row != col && pivot_row[col] != 0.0 {
                let f = r[col] / pivot_row[col];
                for (v, p) in r.iter_mut().zip(pivot_row).skip(col) {
                    *v -= f * p;
                }
            }
        }
    }
    let x = |i: usize| m[i][4] / m[i][i];
    SeekCurve {
        boundary,
        short_a: x(0),
        short_b: x(1),
        long_a: x(2),
        long_b: x(3),
    }
}

/// A 7,200 rpm disk: the Hitachi Travelstar 7K320 (2.5", 320 GB). From its
/// OEM specification (manualowl.com/m/Hitachi/7K320/Manual/334882, p. 19):
/// 7,200 rpm, single-track seek 1.0 ms, average seek 12 ms, full-stroke
/// seek 20.0 ms (read, typical). Not in the data sheet, assumed: 2 platters
/// (4 heads), 1,000 sectors per track (the order of the 1,092 of a 2002
/// IBM Deskstar 180GXP, xbitlabs), hence 156,250 cylinders for 320 GB; a
/// head switch of 1.0 ms (the single-track seek); skews of a head switch's
/// worth of sectors; controller overhead 0.3 ms; the regimes meeting at the
/// same fraction of the stroke as the HP 97560's (383/1962).
pub fn travelstar_7k320() -> Geometry {
    let cylinders = 156_250;
    let boundary = (f64::from(cylinders) * 383.0 / 1962.0) as u32;
    let spt = 1000;
    let skew = (1.0 / (60_000.0 / 7200.0 / f64::from(spt))).ceil() as u32;
    Geometry {
        name: "Hitachi Travelstar 7K320".into(),
        source: "OEM specification p.19 (rpm, 1.0/12/20.0 ms seeks); geometry, head switch, skew and overhead assumed".into(),
        cylinders,
        heads: 4,
        sectors_per_track: spt,
        rpm: 7200.0,
        track_skew: skew,
        cylinder_skew: skew,
        head_switch_ms: 1.0,
        controller_overhead_ms: 0.3,
        seek: fit_seek(1.0, 12.0, 20.0, cylinders, boundary),
    }
}

/// An SSD: the Samsung 970 EVO Plus 1 TB. From its specification table
/// (as reprinted by digit.in's review): 4 KB random read 19k IOPS at queue
/// depth 1 (52.6 µs a read) and 600k IOPS at depth 32; random write 60k
/// IOPS at depth 1 (16.7 µs a write). Internal parallelism: 600k / 19k ≈
/// 32 requests at once (the depth of the rated figure).
pub fn evo_970_plus() -> Flash {
    Flash {
        name: "Samsung 970 EVO Plus 1TB".into(),
        source:
            "specification table: 4KB random read QD1 19k IOPS, QD32 600k IOPS; write QD1 60k IOPS"
                .into(),
        read_ms: 1000.0 / 19_000.0,
        write_ms: 1000.0 / 60_000.0,
        channels: 32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fitted_curve_meets_the_data_sheet() {
        let g = travelstar_7k320();
        let s = g.seek;
        assert!((s.ms(1) - 1.0).abs() < 1e-6, "{s:?}");
        assert!((s.ms(g.cylinders - 1) - 20.0).abs() < 1e-6, "{s:?}");
        let b = s.boundary;
        assert!((s.short_a + s.short_b * f64::from(b).sqrt() - s.ms(b)).abs() < 1e-6);
        let max = f64::from(g.cylinders - 1);
        let (mut num, mut den) = (0.0, 0.0);
        for n in 1..g.cylinders {
            let w = max + 1.0 - f64::from(n);
            num += w * s.ms(n);
            den += w;
        }
        assert!((num / den - 12.0).abs() < 1e-6, "{}", num / den);
        assert!(s.short_b > 0.0 && s.long_b > 0.0, "{s:?}");
    }
}
