//! Virtual memory: the address-space reservation, the frame table, and the two
//! fault backends (userfaultfd and SIGSEGV). The only module allowed unsafe code.
