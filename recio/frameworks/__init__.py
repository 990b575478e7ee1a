"""recio in other frameworks' shapes.

A map-style dataset for a DataLoader of the user's own (:mod:`.dataset`), and an iterator
as a torch IterableDataset of batches (:mod:`.torch_data`).
"""
