# AWS side: the usual credential chain; the cluster side: the EKS cluster's endpoint
# with a token from `aws eks get-token`.
provider "dovetail" {
  aws {
    region = "us-west-2"
  }
  kubernetes {
    host                   = aws_eks_cluster.this.endpoint
    cluster_ca_certificate = base64decode(aws_eks_cluster.this.certificate_authority[0].data)
    exec {
      api_version = "client.authentication.k8s.io/v1beta1"
      command     = "aws"
      args        = ["eks", "get-token", "--cluster-name", aws_eks_cluster.this.name]
    }
  }
}
