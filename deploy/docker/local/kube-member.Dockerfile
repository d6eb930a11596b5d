# A local member cluster (harness/cmd/kube-member): etcd, kube-apiserver and
# kube-controller-manager as hack/kube-bins.sh builds them, and kube-member to run them.
FROM scratch
ARG VERSION
LABEL org.opencontainers.image.title="flotilla-kube-member" org.opencontainers.image.version="${VERSION}"
COPY etcd kube-apiserver kube-controller-manager kube-member healthcheck /usr/local/bin/
EXPOSE 6443 8081
ENTRYPOINT ["/usr/local/bin/kube-member"]
