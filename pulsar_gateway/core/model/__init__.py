"""The data model: topic names, message ids, the stored-entry format, the Java client's key
hashes. Pure, no I/O."""
