.metadata.labels |
