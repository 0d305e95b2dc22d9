//! The schema: type descriptors (`desc`), their encoding in the catalog
//! (`encoding`), how two layouts differ (`compare`), how a stored layout
//! becomes the program's in a migration (`evolve`) and the file that carries
//! a program's layouts to `amber migrate` (`schema_file`), the check of a
//! program's types (and all they reach) against the catalog (`check`),
//! pointer layouts for swizzling (`layout`), and the registry that maps a
//! database's type ids to them (`registry`).

pub mod check;
pub mod compare;
pub mod desc;
pub mod encoding;
pub mod evolve;
pub mod layout;
pub mod registry;
pub mod schema_file;
