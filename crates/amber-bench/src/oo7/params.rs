//! The OO7 parameters: BENCHMARKS.md's table of sizes, `--modules` and the
//! seed.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A named OO7 configuration (the columns of BENCHMARKS.md's parameter
/// table, plus `tiny` for tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Size {
    /// **(choice)** For tests and CI: 5 atomic parts per composite, 20
    /// composites per module, 3 assembly levels, 200-byte documents, a
    /// 1,000-byte manual.
    Tiny,
    Small,
    Medium,
    QuickstoreSmall,
    QuickstoreBig,
}

impl Size {
    /// Every size, smallest first.
    pub const ALL: [Size; 5] = [
        Size::Tiny,
        Size::Small,
        Size::Medium,
        Size::QuickstoreSmall,
        Size::QuickstoreBig,
    ];

    /// The name used by `--size` and in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Size::Tiny => "tiny",
            Size::Small => "small",
            Size::Medium => "medium",
            Size::QuickstoreSmall => "quickstore-small",
            Size::QuickstoreBig => "quickstore-big",
        }
    }

    /// Parses a name from [`Size::name`].
    pub fn from_name(name: &str) -> Option<Size> {
        Size::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The parameters of this size with its own number of modules and `seed`.
    pub fn params(self, seed: u64) -> Params {
        let (atomic, doc, manual, comps, levels, modules) = match self {
            Size::Tiny => (5, 200, 1_000, 20, 3, 1),
            Size::Small => (20, 2_000, 100_000, 500, 7, 1),
            Size::Medium => (200, 20_000, 1_000_000, 500, 7, 1),
            Size::QuickstoreSmall => (20, 2_000, 100_000, 500, 7, 5),
            Size::QuickstoreBig => (20, 2_000, 100_000, 2_000, 8, 5),
        };
        Params {
            size: self,
            atomic_per_comp: atomic,
            conn_per_atomic: 3,
            document_size: doc,
            manual_size: manual,
            comp_per_module: comps,
            assm_per_assm: 3,
            assm_levels: levels,
            comp_per_assm: 3,
            modules,
            seed,
        }
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Everything the generator draws from: OO7's parameters and the seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Params {
    pub size: Size,
    pub atomic_per_comp: u32,
    pub conn_per_atomic: u32,
    pub document_size: u32,
    pub manual_size: u32,
    pub comp_per_module: u32,
    pub assm_per_assm: u32,
    /// Levels of the assembly hierarchy: the design root is level
    /// `assm_levels`, base assemblies are level 1.
    pub assm_levels: u32,
    pub comp_per_assm: u32,
    pub modules: u32,
    pub seed: u64,
}

impl Params {
    /// Complex assemblies per module: 1 + k + … + k^(levels − 2).
    pub fn complex_per_module(&self) -> u32 {
        (0..self.assm_levels - 1)
            .map(|l| self.assm_per_assm.pow(l))
            .sum()
    }

    /// Base assemblies per module: k^(levels − 1).
    pub fn base_per_module(&self) -> u32 {
        self.assm_per_assm.pow(self.assm_levels - 1)
    }

    /// The module of base assembly `id` (each module numbers its base
    /// assemblies after the previous module's).
    pub fn module_of_base(&self, id: u32) -> u32 {
        1 + (id - 1) / self.base_per_module()
    }

    /// Composite parts in the database.
    pub fn composites(&self) -> u32 {
        self.comp_per_module * self.modules
    }

    /// Atomic parts in the database.
    pub fn atomics(&self) -> u32 {
        self.composites() * self.atomic_per_comp
    }

    /// Atomic parts a T1 of one module visits: every private component of
    /// every base assembly, all its atomic parts.
    pub fn t1_visits(&self) -> u64 {
        u64::from(self.base_per_module())
            * u64::from(self.comp_per_assm)
            * u64::from(self.atomic_per_comp)
    }

    /// Fails with a message when the parameters cannot make a database.
    pub fn validate(&self) -> Result<(), String> {
        if self.modules == 0 || self.modules > 1_000 {
            return Err(format!("--modules must be 1..=1000, got {}", self.modules));
        }
        if self.assm_levels < 2 || self.atomic_per_comp < 1 || self.comp_per_module < 1 {
            return Err(
                "an OO7 database needs 2 assembly levels, a composite part and an atomic part"
                    .into(),
            );
        }
        if self.conn_per_atomic < 1 {
            return Err("every atomic part needs at least its ring connection".into());
        }
        Ok(())
    }
}
