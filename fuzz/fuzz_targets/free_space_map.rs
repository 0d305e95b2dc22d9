#![no_main]
amber_fuzz::target!(free_space_map);
