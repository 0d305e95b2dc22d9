#![no_main]
amber_fuzz::target!(superblock);
