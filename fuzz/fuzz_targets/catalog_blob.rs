#![no_main]
amber_fuzz::target!(catalog_blob);
