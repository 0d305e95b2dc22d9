//! The schema: type descriptors, their encoding in the catalog, how two
//! layouts differ, the check of a program's types (and all they reach)
//! against the catalog, pointer layouts for swizzling, and the registry that
//! maps a database's type ids to them.

pub mod check;
pub mod compare;
pub mod desc;
pub mod layout;
pub mod registry;
