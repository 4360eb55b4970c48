terraform import dovetail_node_access_entry.this demo:arn:aws:iam::123456789012:role/KarpenterNodeRole-demo
