//! The schema: type descriptors, their encoding in the catalog, pointer
//! layouts for swizzling, and the registry that maps a database's type ids to
//! them.

pub mod desc;
pub mod layout;
pub mod registry;
