//! The storage devices the simulated server reads and writes pages on.
//!
//! [`Geometry`] is a rotating disk in Ruemmler & Wilkes' model: a seek curve
//! with a square-root regime for short seeks and a linear one for long seeks,
//! head switches, track and cylinder skew, a fixed rotation speed and a
//! controller overhead per request. [`Geometry::hp97560`] is the HP 97560
//! exactly as `BENCHMARKS.md` gives it. [`Flash`] is a solid-state drive: a
//! flat latency per request and a number of requests it serves at once.
//!
//! Times are in milliseconds (`f64`) of simulated time.

use serde::Serialize;

/// A seek curve `seek(d)`: 0 for `d = 0`, `short_a + short_b·√d` for
/// `0 < d < boundary`, `long_a + long_b·d` otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SeekCurve {
    /// First distance (cylinders) of the linear regime.
    pub boundary: u32,
    /// Constant of the square-root regime, ms.
    pub short_a: f64,
    /// Coefficient of √d in the square-root regime, ms.
    pub short_b: f64,
    /// Constant of the linear regime, ms.
    pub long_a: f64,
    /// Coefficient of d in the linear regime, ms per cylinder.
    pub long_b: f64,
}

impl SeekCurve {
    /// Seek time over `d` cylinders, ms.
    pub fn ms(&self, d: u32) -> f64 {
        if d == 0 {
            0.0
        } else if d < self.boundary {
            self.short_a + self.short_b * f64::from(d).sqrt()
        } else {
            self.long_a + self.long_b * f64::from(d)
        }
    }
}

/// Where a sector is: cylinder, head (track in the cylinder), logical sector
/// in the track.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chs {
    /// Cylinder.
    pub cyl: u32,
    /// Head, that is track within the cylinder.
    pub head: u32,
    /// Logical sector within the track.
    pub sector: u32,
}

/// Where the arm is: cylinder and selected head.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeadPos {
    /// Cylinder under the heads.
    pub cyl: u32,
    /// Selected head.
    pub head: u32,
}

/// One request's service, split as the paper's metrics need it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Access {
    /// Controller overhead, ms.
    pub overhead: f64,
    /// Seek (or head switch) plus rotational wait to the first sector, ms.
    pub positioning: f64,
    /// Transfer of the sectors, ms.
    pub transfer: f64,
    /// Where the arm is afterwards.
    pub end: HeadPos,
}

impl Access {
    /// Time the device is busy with the request, ms.
    pub fn total(&self) -> f64 {
        self.overhead + self.positioning + self.transfer
    }

    /// What the paper calls the cost of an operation: the time the arm is
    /// occupied by it (seek, rotate, transfer), ms.
    pub fn arm(&self) -> f64 {
        self.positioning + self.transfer
    }
}

/// A rotating disk, not zoned.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Geometry {
    /// The drive's name.
    pub name: String,
    /// Where its parameters come from.
    pub source: String,
    /// Cylinders.
    pub cylinders: u32,
    /// Tracks per cylinder (heads).
    pub heads: u32,
    /// Sectors of 512 bytes per track.
    pub sectors_per_track: u32,
    /// Spindle speed.
    pub rpm: f64,
    /// Skew between consecutive tracks of a cylinder, sectors.
    pub track_skew: u32,
    /// Skew between consecutive cylinders, sectors.
    pub cylinder_skew: u32,
    /// Time to switch heads within a cylinder, ms.
    pub head_switch_ms: f64,
    /// Controller overhead per request, ms.
    pub controller_overhead_ms: f64,
    /// The seek curve.
    pub seek: SeekCurve,
}

impl Geometry {
    /// The HP 97560 as `BENCHMARKS.md` gives it (Ruemmler & Wilkes 1994).
    pub fn hp97560() -> Self {
        Self {
            name: "HP 97560".into(),
            source: "Ruemmler & Wilkes, An Introduction to Disk Drive Modeling, IEEE Computer 1994, as given in BENCHMARKS.md".into(),
            cylinders: 1962,
            heads: 19,
            sectors_per_track: 72,
            rpm: 4002.0,
            track_skew: 8,
            cylinder_skew: 18,
            head_switch_ms: 1.6,
            controller_overhead_ms: 2.2,
            seek: SeekCurve {
                boundary: 383,
                short_a: 3.24,
                short_b: 0.400,
                long_a: 8.00,
                long_b: 0.008,
            },
        }
    }

    /// One revolution, ms.
    pub fn revolution_ms(&self) -> f64 {
        60_000.0 / self.rpm
    }

    /// One sector passing under the head, ms.
    pub fn sector_ms(&self) -> f64 {
        self.revolution_ms() / f64::from(self.sectors_per_track)
    }

    /// Sectors per cylinder.
    pub fn sectors_per_cylinder(&self) -> u64 {
        u64::from(self.heads) * u64::from(self.sectors_per_track)
    }

    /// Sectors on the disk.
    pub fn capacity_sectors(&self) -> u64 {
        u64::from(self.cylinders) * self.sectors_per_cylinder()
    }

    /// Where logical block `lbn` is: `c = lbn / (heads·spt)`,
    /// `h = (lbn / spt) % heads`, `s = lbn % spt`.
    pub fn locate(&self, lbn: u64) -> Chs {
        let spt = u64::from(self.sectors_per_track);
        Chs {
            cyl: (lbn / self.sectors_per_cylinder()) as u32,
            head: ((lbn / spt) % u64::from(self.heads)) as u32,
            sector: (lbn % spt) as u32,
        }
    }

    /// The physical slot (angular position, in sectors from the index) of a
    /// sector: `(s + cylinder_skew·c + track_skew·h) mod spt`.
    pub fn slot(&self, at: Chs) -> u32 {
        let spt = u64::from(self.sectors_per_track);
        ((u64::from(at.sector)
            + u64::from(self.cylinder_skew) * u64::from(at.cyl)
            + u64::from(self.track_skew) * u64::from(at.head))
            % spt) as u32
    }

    /// Arm movement from `from` to `to`: the seek if the cylinder changes,
    /// else a head switch if the head changes, else nothing.
    pub fn movement_ms(&self, from: HeadPos, to: Chs) -> f64 {
        if from.cyl != to.cyl {
            self.seek.ms(from.cyl.abs_diff(to.cyl))
        } else if from.head != to.head {
            self.head_switch_ms
        } else {
            0.0
        }
    }

    /// Rotational wait, starting at time `t`, until physical slot `slot`
    /// begins under the head, ms (0 when it begins exactly at `t`).
    pub fn rotational_wait_ms(&self, t: f64, slot: u32) -> f64 {
        let spt = f64::from(self.sectors_per_track);
        let angle = (t / self.sector_ms()).rem_euclid(spt);
        (f64::from(slot) - angle).rem_euclid(spt) * self.sector_ms()
    }

    /// Positioning time of a request for `lbn` whose arm movement starts at
    /// `t` with the arm at `from`: movement plus rotational wait.
    pub fn positioning_ms(&self, from: HeadPos, t: f64, lbn: u64) -> f64 {
        let to = self.locate(lbn);
        let moved = self.movement_ms(from, to);
        moved + self.rotational_wait_ms(t + moved, self.slot(to))
    }

    /// The service of a request for `sectors` sectors at `lbn` that the disk
    /// starts at `start` with the arm at `from`: controller overhead, then
    /// positioning, then transfer. A request must not cross a track.
    pub fn access(&self, from: HeadPos, start: f64, lbn: u64, sectors: u32) -> Access {
        let overhead = self.controller_overhead_ms;
        let positioning = self.positioning_ms(from, start + overhead, lbn);
        let to = self.locate(lbn);
        Access {
            overhead,
            positioning,
            transfer: f64::from(sectors) * self.sector_ms(),
            end: HeadPos {
                cyl: to.cyl,
                head: to.head,
            },
        }
    }
}

/// A solid-state drive: every request takes a fixed time, and up to
/// `channels` requests are served at once.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Flash {
    /// The drive's name.
    pub name: String,
    /// Where its parameters come from.
    pub source: String,
    /// Service time of a page read, ms.
    pub read_ms: f64,
    /// Service time of a page write, ms.
    pub write_ms: f64,
    /// Requests served at once.
    pub channels: u32,
}

/// The device under the simulated server.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Device {
    /// A rotating disk.
    Disk(Geometry),
    /// A solid-state drive.
    Flash(Flash),
}

impl Device {
    /// The device's name.
    pub fn name(&self) -> &str {
        match self {
            Device::Disk(g) => &g.name,
            Device::Flash(f) => &f.name,
        }
    }

    /// Requests the device serves at once.
    pub fn channels(&self) -> u32 {
        match self {
            Device::Disk(_) => 1,
            Device::Flash(f) => f.channels.max(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn rotation_and_sector_time() {
        let g = Geometry::hp97560();
        assert!((g.revolution_ms() - 14.9925).abs() < 1e-4);
        assert!((g.sector_ms() - 0.208229).abs() < 1e-6);
        assert_eq!(g.capacity_sectors(), 1962 * 19 * 72);
    }

    #[test]
    fn seek_curve_regimes() {
        let s = Geometry::hp97560().seek;
        assert_eq!(s.ms(0), 0.0);
        assert!(close(s.ms(1), 3.24 + 0.4));
        assert!(close(s.ms(100), 3.24 + 0.4 * 10.0));
        assert!(close(s.ms(382), 3.24 + 0.4 * 382f64.sqrt()));
        assert!(close(s.ms(383), 8.0 + 0.008 * 383.0));
        assert!(close(s.ms(1961), 8.0 + 0.008 * 1961.0));
        // Increasing across the boundary: SPTF's branch and bound relies on it.
        let mut last = 0.0;
        for d in 0..1962 {
            assert!(s.ms(d) >= last, "seek not monotone at {d}");
            last = s.ms(d);
        }
    }

    #[test]
    fn layout_and_skew() {
        let g = Geometry::hp97560();
        assert_eq!(
            g.locate(0),
            Chs {
                cyl: 0,
                head: 0,
                sector: 0
            }
        );
        let lbn = 5 * 1368 + 3 * 72 + 70;
        assert_eq!(
            g.locate(lbn),
            Chs {
                cyl: 5,
                head: 3,
                sector: 70
            }
        );
        // (70 + 18·5 + 8·3) mod 72 = 184 mod 72 = 40.
        assert_eq!(g.slot(g.locate(lbn)), 40);
        assert_eq!(
            g.slot(Chs {
                cyl: 0,
                head: 1,
                sector: 0
            }),
            8
        );
        assert_eq!(
            g.slot(Chs {
                cyl: 1,
                head: 0,
                sector: 0
            }),
            18
        );
    }

    #[test]
    fn movement_is_seek_or_head_switch() {
        let g = Geometry::hp97560();
        let at = HeadPos { cyl: 10, head: 2 };
        let same_track = g.locate(10 * 1368 + 2 * 72 + 5);
        let other_head = g.locate(10 * 1368 + 7 * 72);
        let other_cyl = g.locate(14 * 1368 + 2 * 72);
        assert_eq!(g.movement_ms(at, same_track), 0.0);
        assert!(close(g.movement_ms(at, other_head), 1.6));
        assert!(close(g.movement_ms(at, other_cyl), 3.24 + 0.4 * 2.0));
    }

    #[test]
    fn rotational_wait_and_access() {
        let g = Geometry::hp97560();
        let sec = g.sector_ms();
        // At t = 0 slot 0 is under the head: wait 0 for slot 0, 10 sectors for slot 10.
        assert!(close(g.rotational_wait_ms(0.0, 0), 0.0));
        assert!(close(g.rotational_wait_ms(0.0, 10), 10.0 * sec));
        // Just past slot 5's start: nearly a whole revolution.
        let w = g.rotational_wait_ms(5.5 * sec, 5);
        assert!(close(w, 71.5 * sec));
        // Full access on the same track from t = 0: overhead 2.2 ms, then the
        // wait from angle 2.2/sec to slot 30, then 8 sectors of transfer.
        let lbn = 30;
        let a = g.access(HeadPos::default(), 0.0, lbn, 8);
        let angle = (2.2 / sec).rem_euclid(72.0);
        assert!(close(a.overhead, 2.2));
        assert!(close(a.positioning, (30.0 - angle).rem_euclid(72.0) * sec));
        assert!(close(a.transfer, 8.0 * sec));
        assert!(close(a.total(), a.overhead + a.arm()));
        assert_eq!(a.end, HeadPos { cyl: 0, head: 0 });
        // With a seek: wait measured from the arm's arrival.
        let far = 500 * 1368 + 4 * 72 + 9;
        let b = g.access(HeadPos::default(), 1.0, far, 8);
        let seek = 8.0 + 0.008 * 500.0;
        let slot = g.slot(g.locate(far));
        assert!(close(
            b.positioning,
            seek + g.rotational_wait_ms(1.0 + 2.2 + seek, slot)
        ));
        assert_eq!(b.end, HeadPos { cyl: 500, head: 4 });
    }
}
