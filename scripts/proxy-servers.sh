# Sourced by scripts/bench-proxy and scripts/bench-proxy-cpu: starts the Rust example server
# (`rmcp_server --mode plain --nodelay`), nginx in front of it (proxy_buffering off, upstream
# keep-alive) and `mcp-frame proxy --dedupe off` in front of it, all on loopback, in $dir (which
# the caller made); they stop when the caller exits. Sets upstream, upstream_port, path,
# nginx_port, nginx_pid, sidecar, sidecar_pid.
#
# $SIDECAR_WRAP and $NGINX_WRAP, when set, are put before the sidecar's and nginx's commands (a
# profiler); $NGINX_WORKERS replaces nginx's worker_processes (auto) and $NGINX_MASTER (on) its
# master_process. $SIDECAR_BIN replaces the sidecar's binary (target/release/mcp-frame: another
# build to compare) and $SIDECAR_ARGS is added to its flags.

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

# A line of LOG matching PATTERN (sed -n regex with one group), waited for (at most 60 s).
wait_for() { # log pattern
  local found=
  for _ in $(seq 600); do
    found=$(sed -n "s/$2/\1/p" "$1" | head -n1)
    [ -n "$found" ] && { printf '%s\n' "$found"; return 0; }
    sleep 0.1
  done
  echo "$0: nothing like '$2' in $1:" >&2
  cat "$1" >&2
  exit 1
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# --nodelay: calls in sequence must not wait for a delayed ACK behind Nagle's algorithm (a 40 ms
# stall on a quiet machine, direct connection included).
target/release/examples/rmcp_server --addr 127.0.0.1:0 --mode plain --seconds 7200 --nodelay >"$dir/upstream.log" 2>&1 &
pids+=($!)
upstream=$(wait_for "$dir/upstream.log" '^listening \(http:[^ ]*\).*')

nginx_port=$(free_port)
upstream_port=${upstream#http://127.0.0.1:}
upstream_port=${upstream_port%%/*}
mkdir -p "$dir/nginx"
for temp in client_body proxy fastcgi uwsgi scgi; do mkdir -p "$dir/nginx/$temp"; done
chmod -R 777 "$dir/nginx"
# What nginx's documentation and the SSE guides recommend for event streams: HTTP/1.1 to the
# upstream with keep-alive (an upstream block with keepalive, an empty Connection header), no
# response buffering; the client's Host forwarded, as the sidecar does (rmcp checks it). One
# worker process a core, as the package's configuration does.
cat >"$dir/nginx/nginx.conf" <<CONF
daemon off;
master_process ${NGINX_MASTER:-on};
worker_processes ${NGINX_WORKERS:-auto};
pid $dir/nginx/nginx.pid;
error_log $dir/nginx/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $dir/nginx/client_body;
    proxy_temp_path $dir/nginx/proxy;
    fastcgi_temp_path $dir/nginx/fastcgi;
    uwsgi_temp_path $dir/nginx/uwsgi;
    scgi_temp_path $dir/nginx/scgi;
    upstream mcp { server 127.0.0.1:$upstream_port; keepalive 64; }
    server {
        listen 127.0.0.1:$nginx_port;
        location / {
            proxy_pass http://mcp;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host \$http_host;
            proxy_buffering off;
            proxy_cache off;
        }
    }
}
CONF
${NGINX_WRAP:-} nginx -p "$dir/nginx" -c "$dir/nginx/nginx.conf" >"$dir/nginx.log" 2>&1 &
nginx_pid=$!
pids+=("$nginx_pid")
for _ in $(seq 600); do
  curl -s -o /dev/null "http://127.0.0.1:$nginx_port/" && break
  sleep 0.1
done

# shellcheck disable=SC2086
${SIDECAR_WRAP:-} "${SIDECAR_BIN:-target/release/mcp-frame}" proxy --upstream "$upstream" --listen 127.0.0.1:0 --dedupe off \
  --log warn,mcp_frame::proxy::serve=info ${SIDECAR_ARGS:-} >"$dir/sidecar.log" 2>&1 &
sidecar_pid=$!
pids+=("$sidecar_pid")
sidecar=$(wait_for "$dir/sidecar.log" '.*listening on \(http:[^ ]*\).*')
path=${upstream#http://127.0.0.1:$upstream_port}
