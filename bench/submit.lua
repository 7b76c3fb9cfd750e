-- wrk script for bench/service.sh: every request submits a small training job.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"name": "bench", "dataset_url": "http://127.0.0.1:9/none.csv", ' ..
           '"hyperparameters": {"epochs": 1}}'
