"""`quarantine init-demo`: the demo's sources (JSON, Avro, Protobuf) with poison, and its config."""
