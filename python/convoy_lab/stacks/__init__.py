"""One vehicle's workload through three real stacks over `convoy emu`:
convoy (agent → serve), MQTT + S3 multipart (mosquitto, paho-mqtt, boto3,
versitygw) and HTTPS PUT per file with whole-file retry. One module per
stack (convoy_stack, mqtt_s3, https_put), the shared feeder in workload,
one run and its figures in run. The experiment is
convoy_lab.experiments.incumbents."""
