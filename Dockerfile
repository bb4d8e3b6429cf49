FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY portal portal
COPY budgets budgets
COPY scheduling scheduling
COPY benchmarks benchmarks
COPY templates templates
COPY static static
COPY manage.py ./
RUN pip install --no-cache-dir .
RUN SECRET_KEY=build python manage.py collectstatic --noinput -v 0 && useradd --system --home /app portal && mkdir -p /app/var && chown portal /app/var
USER portal
EXPOSE 8000
CMD ["gunicorn", "portal.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3"]
