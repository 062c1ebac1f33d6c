"""The data model: topic names, message ids, the stored-entry format. Pure, no I/O."""
